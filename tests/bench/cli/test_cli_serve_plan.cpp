// `gpuledger kv --trace/--length-dist --percentile --headroom` and
// `gpuledger serve-plan`: figures worked by hand from the formulas in
// analytic/serving_plan.h and kv_cache.h, and bad input exiting 2.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "run_cli.h"

using gpuledger::testing::run_cli;
using gpuledger::testing::scratch_dir;
using gpuledger::testing::write_file;

namespace {

constexpr int64_t MiB = 1 << 20;

// Totals 200, 500, 300, 700, 500: sorted 200 300 500 500 700, mean 440, p80 = 4th = 500.
std::string trace5() {
  const std::string path = scratch_dir("serve_plan") + "/trace5.jsonl";
  write_file(path,
             "{\"prompt_len\": 100, \"gen_len\": 100}\n{\"prompt_len\": 200, \"gen_len\": 300}\n"
             "{\"prompt_len\": 150, \"gen_len\": 150}\n{\"prompt_len\": 500, \"gen_len\": 200}\n"
             "{\"prompt_len\": 50, \"gen_len\": 450}\n");
  return path;
}

TEST(CliKvTrace, PercentileAndHeadroom) {
  auto r = run_cli({"kv", "--model", "llama2-7b", "--device", "a100-40gb", "--context", "1024", "--requests", "8",
                    "--trace", trace5(), "--percentile", "80", "--headroom", "1.2", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = r.json();
  const auto& b = doc["summary"]["by_length"];
  ASSERT_EQ(b.size(), 2u);
  // Llama-2-7B: 512 KiB per token; paged blocks of 16 tokens = 8 MiB.
  EXPECT_EQ(b[0]["basis"], "mean");
  EXPECT_EQ(b[0]["tokens"].get<int64_t>(), 440);
  EXPECT_EQ(b[0]["sequence_reserved_bytes"].get<int64_t>(), 28 * 8 * MiB);  // ⌈440/16⌉ = 28 blocks
  // 8 · 28 blocks + the null block = 225 blocks = 1,800 MiB, × 1.2 = 2,160 MiB.
  EXPECT_EQ(b[0]["requests_reserved_bytes"].get<int64_t>(), 2160 * MiB);
  EXPECT_EQ(b[1]["basis"], "p80");
  EXPECT_EQ(b[1]["tokens"].get<int64_t>(), 500);
  EXPECT_EQ(b[1]["sequence_reserved_bytes"].get<int64_t>(), 32 * 8 * MiB);
  // (8 · 32 + 1) · 8 MiB = 2,056 MiB; × 1.2 = 2,467.2 MiB, rounded up to the byte.
  EXPECT_EQ(b[1]["requests_reserved_bytes"].get<int64_t>(), static_cast<int64_t>(std::ceil(2056.0 * MiB * 1.2 - 1e-9)));
  // The capacity counts pool / 1.2: ⌊(⌊pool/1.2⌋ / 8 MiB) − 1⌋ / 32 sequences at the p80 length.
  const int64_t pool = doc["summary"]["pool_bytes"].get<int64_t>();
  const auto planned = static_cast<int64_t>(std::floor(static_cast<double>(pool) / 1.2));
  EXPECT_EQ(b[1]["capacity"]["pool_bytes"].get<int64_t>(), planned);
  EXPECT_EQ(b[1]["capacity"]["sequences"].get<int64_t>(), (planned / (8 * MiB) - 1) / 32);
  EXPECT_EQ(b[0]["capacity"]["sequences"].get<int64_t>(), (planned / (8 * MiB) - 1) / 28);
  EXPECT_EQ(doc["config"]["kv"]["lengths"]["requests"].get<int64_t>(), 5);
  // The same lengths as a list give the same figures.
  auto l = run_cli({"kv", "--model", "llama2-7b", "--device", "a100-40gb", "--context", "1024", "--requests", "8",
                    "--length-dist", "200,500,300,700,500", "--percentile", "80", "--json", "-"});
  ASSERT_EQ(l.status, 0) << l.err;
  EXPECT_EQ(l.json()["summary"]["by_length"], b);
}

TEST(CliKvTrace, BadInputExitsTwo) {
  const std::string t = trace5();
  const std::vector<std::vector<std::string>> cases = {
      {"kv", "--model", "llama2-7b", "--percentile", "95"},  // no trace
      {"kv", "--model", "llama2-7b", "--trace", t, "--percentile", "0"},
      {"kv", "--model", "llama2-7b", "--trace", t, "--headroom", "0.8"},
      {"kv", "--model", "llama2-7b", "--trace", t, "--length-dist", "100"},
      {"kv", "--model", "llama2-7b", "--length-dist", "100,0"},
      {"kv", "--model", "llama2-7b", "--trace", "/nonexistent/trace.jsonl"},
  };
  for (const auto& c : cases) {
    auto r = run_cli(c);
    EXPECT_EQ(r.status, 2) << c[4] << " " << r.err;
    EXPECT_FALSE(r.err.empty());
  }
}

TEST(CliServePlan, TheWorkedCase) {
  auto r = run_cli({"serve-plan", "--model", "llama2-7b", "--dtype", "bf16", "--qps", "50", "--prompt-tokens", "200",
                    "--output-tokens", "500", "--devices", "a10g,a100-40gb", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = r.json();
  // Llama-2-7B: 6,738,415,616 parameters, 2 bytes each; 512 KiB of KV per token.
  EXPECT_EQ(doc["model"]["weight_bytes"].get<int64_t>(), 2 * int64_t{6'738'415'616});
  EXPECT_EQ(doc["model"]["kv_bytes_per_token"].get<int64_t>(), 512 * 1024);
  ASSERT_EQ(doc["devices"].size(), 2u);
  const auto& a10g = doc["devices"][0];
  const auto& a100 = doc["devices"][1];
  // a = 13,476,831,232 / (600e9 · 0.6); b = 524,288 · (200 + 250) / (600e9 · 0.6) = 6.5536e-4 s:
  // λ·N·b = 50 · 500 · 6.5536e-4 = 16.4 ≥ 1, one A10G cannot keep up. On the A100 (1,555e9 · 0.6):
  // b = 2.52872e-4, λ·N·b = 6.32: neither can one A100.
  EXPECT_NEAR(a10g["single"]["decode_fixed_s"].get<double>(), 13'476'831'232.0 / 360e9, 1e-12);
  EXPECT_NEAR(a10g["single"]["decode_per_seq_s"].get<double>(), 6.5536e-4, 1e-12);
  EXPECT_FALSE(a10g["single"]["stable"].get<bool>());
  EXPECT_NEAR(a100["single"]["decode_per_seq_s"].get<double>(), 524288.0 * 450 / 933e9, 1e-12);
  EXPECT_FALSE(a100["single"]["stable"].get<bool>());
  // The A10G has no published peak: no prefill time.
  EXPECT_TRUE(a10g["peak_flops"].is_null());
  EXPECT_EQ(a10g["single"]["prefill_s"].get<double>(), 0.0);
  EXPECT_EQ(a10g["terms"]["cublas_workspace_bytes"].get<int64_t>(), 8'519'680);
  for (const auto* d : {&a10g, &a100}) {
    const auto& p = (*d)["plan"];
    ASSERT_FALSE(p.is_null()) << (*d)["name"];
    // Little's law holds at the chosen point: L = (λ / r) · W.
    EXPECT_NEAR(p["concurrency"].get<double>(), p["replica_qps"].get<double>() * p["time_in_system_s"].get<double>(),
                1e-9);
    EXPECT_LE(p["need_bytes"].get<int64_t>(), p["usable_bytes"].get<int64_t>());
    EXPECT_TRUE(p["fits"].get<bool>());
  }
}

TEST(CliServePlan, BadInputExitsTwo) {
  const std::vector<std::string> base = {"serve-plan", "--model", "llama2-7b"};
  const std::vector<std::vector<std::string>> cases = {
      {"--qps", "0", "--prompt-tokens", "200", "--output-tokens", "500"},
      {"--qps", "-3", "--prompt-tokens", "200", "--output-tokens", "500"},
      {"--qps", "50", "--prompt-tokens", "200"},  // no output length
      {"--qps", "50", "--prompt-tokens", "200", "--output-tokens", "500", "--devices", "a10g,tpu"},
      {"--qps", "50", "--prompt-tokens", "200", "--output-tokens", "500", "--mbu", "1.5"},
      {"--qps", "50", "--prompt-tokens", "200", "--output-tokens", "500", "--headroom", "0.5"},
      {"--qps", "50", "--prompt-tokens", "0", "--output-tokens", "500"},
      {"--qps", "50", "--prompt-tokens", "200", "--output-tokens", "500", "--percentile", "95"},
      {"--qps", "50", "--trace", trace5(), "--prompt-tokens", "200"},
      {"--qps", "50", "--trace", trace5(), "--percentile", "101"},
      {"--prompt-tokens", "200", "--output-tokens", "500"},  // no --qps
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = base;
    args.insert(args.end(), c.begin(), c.end());
    auto r = run_cli(args);
    EXPECT_EQ(r.status, 2) << c[0] << " " << c[1] << " " << r.err;
    EXPECT_FALSE(r.err.empty());
  }
}

TEST(CliServePlan, TracePercentileSizesTheKv) {
  auto r = run_cli({"serve-plan", "--model", "llama2-7b", "--qps", "1", "--trace", trace5(), "--percentile", "80",
                    "--devices", "a100-40gb", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = r.json();
  const auto& s = doc["config"]["serving"];
  EXPECT_EQ(s["kv_sizing_tokens"].get<int64_t>(), 500);
  EXPECT_DOUBLE_EQ(s["prompt_tokens"].get<double>(), 200.0);  // (100 + 200 + 150 + 500 + 50) / 5
  EXPECT_DOUBLE_EQ(s["output_tokens"].get<double>(), 240.0);  // (100 + 300 + 150 + 200 + 450) / 5
}

}  // namespace
