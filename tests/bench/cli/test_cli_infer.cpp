// CLI tests for `gpuledger infer`: the report (kind "infer", measured.kv
// figures equal to the hand formula, capacity measured == predicted, every
// check passing), contiguous reservations, a trace that overflows a small
// pool (preemptions, every request completed), per-tensor scales failing on
// outlier key channels where per-channel scales do not, and usage errors.
//
// tiny-llama with a bf16 cache: 2 (K, V) · 2 layers · 2 KV heads · 16 · 2
// bytes = 256 bytes per token; a 16-token block is 4096 bytes.
#include <gtest/gtest.h>

#include <string>

#include "run_cli.h"

using gpuledger::testing::run_cli;
using gpuledger::testing::scratch_dir;
using gpuledger::testing::write_file;

namespace {

constexpr int64_t kTokenBytes = 256, kBlockBytes = 16 * kTokenBytes;

TEST(CliInfer, PagedReportHoldsTheKvFiguresAndPassesItsChecks) {
  auto r = run_cli({"infer", "--model", "tiny-llama", "--device-memory", "64Mi", "--requests", "4", "--prompt-len",
                    "10", "--gen-len", "6", "--max-batch", "8", "--prefill-chunk", "64", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = r.json();
  EXPECT_EQ(doc["kind"], "infer");
  EXPECT_EQ(doc["status"], "ok");
  const auto& rank = doc["ranks"][0];
  const auto& kv = rank["measured"]["kv"];
  // 4 sequences of 15 tokens: one block each, + the null block
  EXPECT_EQ(kv["peak_assigned_bytes"], 5 * kBlockBytes);
  EXPECT_EQ(kv["peak_token_bytes"], 4 * 15 * kTokenBytes);
  EXPECT_EQ(kv["pool_bytes"], rank["measured"]["peak_by_account"]["kv"]);
  EXPECT_EQ(rank["capacity"]["measured"], rank["capacity"]["predicted"]);
  EXPECT_GT(rank["capacity"]["measured"].get<int64_t>(), 0);
  EXPECT_EQ(doc["summary"]["decode"]["tokens"], 4 * 5);
  EXPECT_EQ(doc["summary"]["prefill"]["tokens"], 4 * 10);
  EXPECT_EQ(doc["summary"]["kv_bytes_per_token"], kTokenBytes);
  EXPECT_TRUE(doc["summary"]["peak_bandwidth"].is_number());  // measured by this run
  ASSERT_EQ(doc["checks"].size(), 6u);
  for (const auto& c : doc["checks"]) EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
}

TEST(CliInfer, ContiguousReservesMaxModelLenPerRequest) {
  auto r = run_cli({"infer", "--model", "tiny-llama", "--device-memory", "64Mi", "--kv", "contiguous",
                    "--max-model-len", "64", "--requests", "4", "--prompt-len", "10", "--gen-len", "6", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = r.json();
  const auto& kv = doc["ranks"][0]["measured"]["kv"];
  EXPECT_EQ(kv["pool_bytes"], 4 * 64 * kTokenBytes);
  EXPECT_EQ(kv["peak_assigned_bytes"], 4 * 64 * kTokenBytes);
  EXPECT_EQ(kv["peak_token_bytes"], 4 * 15 * kTokenBytes);
  EXPECT_EQ(doc["ranks"][0]["measured"]["waste"]["bytes"], 4 * (64 - 15) * kTokenBytes);
}

TEST(CliInfer, ATraceOverflowingThePoolIsServedWithPreemptions) {
  const std::string dir = scratch_dir("cli_infer_trace");
  std::string trace;
  for (int i = 0; i < 6; ++i)
    trace += "{\"prompt_len\": 20, \"gen_len\": 40, \"arrival\": " + std::to_string(i) + "}\n";
  write_file(dir + "/trace.jsonl", trace);
  const std::vector<std::string> base = {
      "infer", "--model", "tiny-llama", "--device-memory", "64Mi", "--trace", dir + "/trace.jsonl", "--prefill-chunk",
      "32",    "--json",  "-"};
  auto big = run_cli(base);
  ASSERT_EQ(big.status, 0) << big.err;
  const auto b = big.json();
  EXPECT_EQ(b["summary"]["preemptions"], 0);
  // Pin the pool to 12 blocks (11 usable: 176 tokens) with --overhead; six
  // sequences of 59 tokens need 4 blocks each.
  const auto& m = b["ranks"][0]["measured"];
  // vLLM's default gpu_memory_utilization, 0.92 (vllm/config/cache.py).
  ASSERT_EQ(b["config"]["infer"]["memory_utilization"].get<double>(), 0.92);
  const int64_t usable = static_cast<int64_t>(0.92 * 64 * 1024 * 1024);
  const int64_t overhead = usable - m["peak_by_account"]["weights"].get<int64_t>() -
                           m["activation_peak_bytes"].get<int64_t>() - 12 * kBlockBytes;
  auto args = base;
  args.insert(args.end(), {"--overhead", std::to_string(overhead)});
  auto small = run_cli(args);
  ASSERT_EQ(small.status, 0) << small.err;
  const auto s = small.json();
  EXPECT_EQ(s["ranks"][0]["measured"]["kv"]["pool_bytes"], 12 * kBlockBytes);
  EXPECT_GT(s["summary"]["preemptions"].get<int64_t>(), 0);
  for (const auto& c : s["checks"]) EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();  // requests.completed among them
}

TEST(CliInfer, PerTensorScalesFailOnOutlierKeyChannels) {
  double rms[2];
  int i = 0;
  for (const char* scales : {"tensor", "channel"}) {
    auto r = run_cli({"infer", "--model", "tiny-llama", "--device-memory", "64Mi", "--kv-dtype", "int8", "--kv-scales",
                      scales, "--kv-outliers", "4", "--requests", "1", "--prompt-len", "60", "--gen-len", "2", "--json",
                      "-"});
    ASSERT_EQ(r.status, 0) << r.err;
    rms[i++] = r.json()["summary"]["kv_error"]["rms"].get<double>();
  }
  EXPECT_GT(rms[0], 2 * rms[1]) << "tensor " << rms[0] << " vs channel " << rms[1];
}

TEST(CliInfer, Int4CacheBytesMeasuredEqualTheBudget) {
  // tiny-llama (L 2, k_t 2, d 16), int4 groups of 8: values 2·2·2·16/2 = 64 B,
  // (scale, zero) fp16 pairs 2·2·2·(16/8)·4 = 64 B: 128 B per token.
  auto r = run_cli({"infer", "--model", "tiny-llama", "--device-memory", "64Mi", "--kv-dtype", "int4",
                    "--kv-group-size", "8", "--requests", "4", "--prompt-len", "10", "--gen-len", "6", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = r.json();
  EXPECT_EQ(doc["summary"]["kv_bytes_per_token"], 128);
  EXPECT_EQ(doc["summary"]["kv_scale_bytes_per_token"], 64);
  const auto& kv = doc["ranks"][0]["measured"]["kv"];
  EXPECT_EQ(kv["peak_assigned_bytes"], 5 * 16 * 128);  // one block each + the null block
  EXPECT_EQ(kv["peak_token_bytes"], 4 * 15 * 128);
  EXPECT_EQ(doc["ranks"][0]["analytic"]["kv_bytes_per_token"], 128);
  for (const auto& c : doc["checks"]) EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
  // int4's attention error is measured beside the run, and larger than int8's.
  const double int4_rms = doc["summary"]["kv_error"]["rms"].get<double>();
  auto r8 = run_cli({"infer", "--model", "tiny-llama", "--device-memory", "64Mi", "--kv-dtype", "int8", "--requests",
                     "4", "--prompt-len", "10", "--gen-len", "6", "--json", "-"});
  ASSERT_EQ(r8.status, 0) << r8.err;
  EXPECT_GT(int4_rms, 2 * r8.json()["summary"]["kv_error"]["rms"].get<double>());
  EXPECT_GT(int4_rms, 0.0);
}

TEST(CliInfer, UsageErrorsExitTwo) {
  EXPECT_EQ(run_cli({"infer", "--model", "tiny-llama"}).status, 2);  // no device memory
  EXPECT_EQ(run_cli({"infer", "--model", "tiny-llama", "--device-memory", "64Mi", "--tp", "2"}).status, 2);
  EXPECT_EQ(run_cli({"infer", "--model", "tiny-llama", "--device-memory", "64Mi", "--kv-dtype", "fp4"}).status, 2);
  // int4's default group of 32 does not divide tiny-llama's head dim 16
  EXPECT_EQ(run_cli({"infer", "--model", "tiny-llama", "--device-memory", "64Mi", "--kv-dtype", "int4"}).status, 2);
}

}  // namespace
