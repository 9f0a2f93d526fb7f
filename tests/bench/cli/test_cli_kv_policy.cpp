// CLI tests for a KV budget (--kv-policy window|sink|h2o, --kv-budget,
// --kv-sink-tokens): `kv` predicts the bytes of `budget` kept tokens, `infer`
// measures them (peak assigned, capacity) equal to the prediction, reports
// the tokens evicted and the output error against a full cache, and bad
// combinations exit 2.
//
// tiny-llama with a bf16 cache: 256 bytes per token, 4096 per 16-token block.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "run_cli.h"

using gpuledger::testing::run_cli;

namespace {

constexpr int64_t kBlockBytes = 16 * 256;

std::vector<std::string> infer_args(const std::string& policy, int64_t budget, int64_t prompt, int64_t gen) {
  return {"infer",
          "--model",
          "tiny-llama",
          "--device-memory",
          "64Mi",
          "--requests",
          "3",
          "--prompt-len",
          std::to_string(prompt),
          "--gen-len",
          std::to_string(gen),
          "--kv-policy",
          policy,
          "--kv-budget",
          std::to_string(budget),
          "--json",
          "-"};
}

TEST(CliKvPolicy, KvPredictsTheBudgetsBytes) {
  auto full = run_cli({"kv", "--model", "llama3-8b", "--context", "32768", "--requests", "8", "--json", "-"});
  auto sink = run_cli({"kv", "--model", "llama3-8b", "--context", "32768", "--requests", "8", "--kv-policy", "sink",
                       "--kv-budget", "2048", "--json", "-"});
  ASSERT_EQ(full.status, 0) << full.err;
  ASSERT_EQ(sink.status, 0) << sink.err;
  const auto f = full.json(), s = sink.json();
  EXPECT_EQ(s["config"]["kv"]["policy"], "sink");
  EXPECT_EQ(s["config"]["kv"]["budget"], 2048);
  EXPECT_EQ(s["config"]["kv"]["sink_tokens"], 4);
  EXPECT_EQ(f["ranks"][0]["per_sequence"]["tokens_kept"], 32768);
  EXPECT_EQ(s["ranks"][0]["per_sequence"]["tokens_kept"], 2048);
  // llama3-8b: 2 · 32 layers · 8 heads · 128 · 2 B = 128 KiB per token; 2048 tokens = 128 blocks of 16.
  const int64_t block = 16 * 131072;
  EXPECT_EQ(s["ranks"][0]["per_sequence"]["reserved_bytes"], 128 * block);
  EXPECT_EQ(s["ranks"][0]["analytic"]["exact"]["kv"], (8 * 128 + 1) * block);
}

TEST(CliKvPolicy, InferMeasuresTheBudgetAndTheOutputError) {
  for (const std::string policy : {"window", "sink", "h2o"}) {
    // 3 requests of 20 + 40 tokens under a budget of 32: each holds 2 blocks at most.
    auto r = run_cli(infer_args(policy, 32, 20, 40));
    ASSERT_EQ(r.status, 0) << policy << ": " << r.err;
    const auto doc = r.json();
    for (const auto& c : doc["checks"]) EXPECT_TRUE(c["ok"].get<bool>()) << policy << ": " << c.dump();
    EXPECT_EQ(doc["config"]["infer"]["kv_policy"], policy);
    const auto& kv = doc["ranks"][0]["measured"]["kv"];
    EXPECT_EQ(kv["peak_assigned_bytes"], (3 * 2 + 1) * kBlockBytes) << policy;
    EXPECT_EQ(kv["peak_token_bytes"], 3 * 32 * 256) << policy;
    // The cache holds 20 + 39 tokens of each (the last generated token is never fed back).
    EXPECT_EQ(doc["summary"]["evicted_tokens"], 3 * (59 - 32)) << policy;
    const auto& e = doc["summary"]["kv_policy_error"];
    ASSERT_TRUE(e["computed"].get<bool>()) << e.dump();
    EXPECT_EQ(e["sequences"], 3);
    EXPECT_EQ(e["positions"], 3 * (60 - 32));
    EXPECT_GT(e["rms"].get<double>(), 0.0) << policy;
    EXPECT_LT(e["rms"].get<double>(), e["reference_rms"].get<double>()) << policy;
  }
}

TEST(CliKvPolicy, NothingEvictedWithinTheBudgetMeansNoError) {
  auto r = run_cli(infer_args("h2o", 64, 20, 40));
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = r.json();
  EXPECT_EQ(doc["summary"]["evicted_tokens"], 0);
  EXPECT_EQ(doc["summary"]["kv_policy_error"]["positions"], 0);
  EXPECT_EQ(doc["summary"]["kv_policy_error"]["rms"], 0.0);
}

TEST(CliKvPolicy, BadCombinationsExitTwo) {
  const std::vector<std::string> base = {"infer", "--model", "tiny-llama", "--device-memory", "64Mi"};
  auto with = [&](std::vector<std::string> extra) {
    auto a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return run_cli(a);
  };
  EXPECT_EQ(with({"--kv-budget", "32"}).status, 2);                        // no policy
  EXPECT_EQ(with({"--kv-policy", "h2o"}).status, 2);                       // no budget
  EXPECT_EQ(with({"--kv-policy", "sink", "--kv-budget", "4"}).status, 2);  // 4 sinks of 4
  EXPECT_EQ(with({"--kv-policy", "lru", "--kv-budget", "8"}).status, 2);   // unknown
  EXPECT_EQ(with({"--kv-policy", "sink", "--kv-budget", "8", "--preemption", "swap"}).status, 2);
  auto mistral = run_cli({"kv", "--model", "mistral-7b", "--kv-policy", "sink", "--kv-budget", "1024"});
  EXPECT_EQ(mistral.status, 2);
  EXPECT_NE(mistral.err.find("sliding-window"), std::string::npos) << mistral.err;
}

}  // namespace
