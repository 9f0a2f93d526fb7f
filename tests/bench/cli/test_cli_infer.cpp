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
  // six serving checks, and decode MFU <= 100 % of the measured and of the hardware peak
  ASSERT_EQ(doc["checks"].size(), 8u);
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
  EXPECT_EQ(s["summary"]["swap"]["swap_outs"], 0);

  // The same by swap: every swapped block comes back, whole blocks each way,
  // the host copy booked in the rank's ledger under `host` (at most the 11
  // usable blocks), outside the device total.
  args.insert(args.end(), {"--preemption", "swap"});
  auto swapped = run_cli(args);
  ASSERT_EQ(swapped.status, 0) << swapped.err;
  const auto w = swapped.json();
  EXPECT_EQ(w["config"]["infer"]["preemption"], "swap");
  const auto& sw = w["summary"]["swap"];
  EXPECT_GT(sw["swap_outs"].get<int64_t>(), 0);
  EXPECT_EQ(sw["swap_outs"], sw["swap_ins"]);
  EXPECT_EQ(sw["swap_outs"], w["summary"]["preemptions"]);
  EXPECT_EQ(sw["bytes_to_host"], sw["bytes_from_host"]);
  EXPECT_EQ(sw["bytes_to_host"].get<int64_t>() % kBlockBytes, 0);
  EXPECT_GT(sw["host_peak_bytes"].get<int64_t>(), 0);
  EXPECT_LE(sw["host_peak_bytes"].get<int64_t>(), 11 * kBlockBytes);
  const auto& wm = w["ranks"][0]["measured"];
  EXPECT_EQ(wm["peak_host_bytes"], sw["host_peak_bytes"]);
  EXPECT_EQ(wm["peak_by_account"]["host"], sw["host_peak_bytes"]);
  int64_t at_peak_device = 0;
  for (const auto& [name, v] : wm["at_peak"].items())
    if (name != "host") at_peak_device += v.get<int64_t>();
  EXPECT_EQ(wm["peak_bytes"].get<int64_t>(), at_peak_device);  // the device peak holds no host bytes
  // The ledger's host peak against the swap space's own count of blocks out
  // at once, times the block: to the byte.
  int host_checks = 0;
  for (const auto& c : w["checks"])
    if (c["name"] == "kv.swap.host_peak_bytes") {
      ++host_checks;
      EXPECT_EQ(c["measured"], sw["host_peak_bytes"]);
      EXPECT_EQ(c["expected"].get<int64_t>() % kBlockBytes, 0);
      EXPECT_GT(c["expected"].get<int64_t>(), 0);
    }
  EXPECT_EQ(host_checks, 1);
  EXPECT_EQ(w["summary"]["decode"]["tokens"].get<int64_t>() + w["summary"]["mixed"]["decode_tokens"].get<int64_t>(),
            6 * 39);  // nothing recomputed: every request decodes gen − 1 tokens once
  for (const auto& c : w["checks"]) EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
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

// Poisson arrivals on the meta backend: the modelled clock (the datasheet
// roofline) gives every request a TTFT, TPOT and end-to-end latency; prompts
// sharing 32 tokens (two blocks of 16) hit the prefix cache whatever the
// timing, since nothing is evicted from a pool this large: 7 requests · 2 blocks.
TEST(CliInfer, ArrivalsGiveLatencyPercentilesAndPrefixHits) {
  const std::vector<std::string> args = {
      "infer", "--model",      "tiny-llama", "--backend", "meta", "--device",     "h100-sxm", "--requests",
      "8",     "--prompt-len", "48",         "--gen-len", "4",    "--prefix-len", "32",       "--arrival-rate",
      "1000",  "--seed",       "3"};
  auto withjson = args;
  withjson.insert(withjson.end(), {"--json", "-", "--quiet"});
  auto r = run_cli(withjson);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = r.json();
  EXPECT_EQ(doc["config"]["infer"]["arrival_rate"].get<double>(), 1000.0);
  const auto& s = doc["summary"];
  const auto& pc = s["prefix_cache"];
  EXPECT_EQ(pc["hit_blocks"], 14);
  EXPECT_EQ(pc["hit_tokens"], 14 * 16);
  EXPECT_EQ(pc["query_tokens"], 8 * 48);
  EXPECT_DOUBLE_EQ(pc["hit_rate"].get<double>(), 224.0 / 384.0);
  const auto& lat = s["latency"];
  EXPECT_EQ(lat["clock"].get<std::string>().rfind("modelled", 0), 0u) << lat["clock"];
  const auto& f = lat["figures"];
  ASSERT_TRUE(f.is_object());
  EXPECT_EQ(f["completed"], 8);
  for (const char* k : {"ttft_s", "tpot_s", "e2e_s"}) {
    EXPECT_EQ(f[k]["count"], 8) << k;
    EXPECT_GT(f[k]["p50"].get<double>(), 0) << k;
    EXPECT_LE(f[k]["p50"].get<double>(), f[k]["p90"].get<double>()) << k;
    EXPECT_LE(f[k]["p90"].get<double>(), f[k]["p99"].get<double>()) << k;
  }
  // E2E = TTFT + 3 · TPOT for each request, so their means add up too.
  EXPECT_NEAR(f["e2e_s"]["mean"].get<double>(),
              f["ttft_s"]["mean"].get<double>() + 3 * f["tpot_s"]["mean"].get<double>(), 1e-12);
  EXPECT_NEAR(f["request_throughput_per_s"].get<double>(), 8 / f["duration_s"].get<double>(), 1e-9);
  auto table = run_cli(args);
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("TTFT"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("P99"), std::string::npos);
  EXPECT_NE(table.out.find("queueing included"), std::string::npos);
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
  EXPECT_EQ(run_cli({"infer", "--model", "tiny-llama", "--device-memory", "64Mi", "--arrival-rate", "0"}).status, 2);
  EXPECT_EQ(run_cli({"infer", "--model", "tiny-llama", "--device-memory", "64Mi", "--arrival-rate", "-3"}).status, 2);
  EXPECT_EQ(
      run_cli({"infer", "--model", "tiny-llama", "--device-memory", "64Mi", "--max-num-batched-tokens", "0"}).status,
      2);
  const std::string dir = scratch_dir("cli_infer_arrivals");
  write_file(dir + "/timed.jsonl", "{\"prompt_len\": 4, \"gen_len\": 2, \"arrival_s\": 0.5}\n");
  write_file(dir + "/negative.jsonl", "{\"prompt_len\": 4, \"gen_len\": 2, \"arrival_s\": -1}\n");
  EXPECT_EQ(
      run_cli({"infer", "--model", "tiny-llama", "--device-memory", "64Mi", "--trace", dir + "/negative.jsonl"}).status,
      2);
  const auto contiguous_swap = run_cli({"infer", "--model", "tiny-llama", "--device-memory", "64Mi", "--kv",
                                        "contiguous", "--max-model-len", "256", "--preemption", "swap"});
  EXPECT_EQ(contiguous_swap.status, 2);
  EXPECT_NE(contiguous_swap.err.find("--preemption swap moves blocks: it needs --kv paged"), std::string::npos)
      << contiguous_swap.err;
  // Arrival times from the trace and from --arrival-rate: one or the other.
  EXPECT_EQ(run_cli({"infer", "--model", "tiny-llama", "--device-memory", "64Mi", "--trace", dir + "/timed.jsonl",
                     "--arrival-rate", "5"})
                .status,
            2);
  // int4's default group of 32 does not divide tiny-llama's head dim 16
  EXPECT_EQ(run_cli({"infer", "--model", "tiny-llama", "--device-memory", "64Mi", "--kv-dtype", "int4"}).status, 2);
}

}  // namespace

// A MoE model serves on one rank through its router and experts. On meta the
// router reads zeros: every token's logits tie and top-2 takes experts 0 and
// 1, so each decode step of tiny-moe (4 experts) routes to 2 per layer, and
// reads one expert of 3·32·24 bf16 values = 4608 B less per unrouted expert.
TEST(CliInfer, MoeDecodeCountsTheRoutedExperts) {
  auto r = run_cli({"infer", "--model", "tiny-moe", "--backend", "meta", "--device", "h100-sxm", "--requests", "3",
                    "--prompt-len", "6", "--gen-len", "3", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = r.json();
  const auto& moe = doc["summary"]["moe"];
  EXPECT_EQ(moe["experts"], 4);
  EXPECT_EQ(moe["top_k"], 2);
  EXPECT_EQ(moe["layers"], 2);
  EXPECT_EQ(moe["decode_steps"], 2);  // 3 tokens each: the first from the prefill, then 2 decode steps of 3
  EXPECT_EQ(moe["expert_weight_bytes"], 4608);
  EXPECT_DOUBLE_EQ(moe["experts_per_layer_step"].get<double>(), 2.0);
  // uniform routing, batch 3: 4·(1 − (1/2)³) = 3.5
  EXPECT_DOUBLE_EQ(moe["experts_per_layer_step_modeled"].get<double>(), 3.5);
  // bf16: 34,272 parameters less the table but 3 rows of 32, less 2·2 unrouted experts
  EXPECT_DOUBLE_EQ(moe["weight_bytes_per_step"].get<double>(), (34'272 - 97 * 32 + 3 * 32) * 2 - 4 * 4608);
  EXPECT_DOUBLE_EQ(moe["weight_bytes_per_step_modeled"].get<double>(), (34'272 - 97 * 32 + 3 * 32) * 2 - 1 * 4608);
  bool routed_check = false;
  for (const auto& c : doc["checks"]) {
    EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
    routed_check = routed_check || c["name"] == "moe.decode_weight_bytes";
  }
  EXPECT_TRUE(routed_check);
}
