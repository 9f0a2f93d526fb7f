// ZeRO 3 over one data-parallel rank: the shard of every unit is the whole
// unit, nothing is gathered, so the weights hold e·P_r — the same bytes as
// ZeRO 0 — and the run passes its own checks on every dp = 1 layout (one
// rank on the CPU backend; tp and pp ranks simulated on the meta backend).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "run_cli.h"

using gpuledger::testing::run_cli;

namespace {

nlohmann::json train(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"train", "--seq",   "32", "--mbs",   "2",      "--microbatches",
                                   "2",     "--steps", "1",  "--quiet", "--json", "-"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = run_cli(args);
  EXPECT_EQ(r.status, 0) << r.err;
  return r.status == 0 ? r.json() : nlohmann::json::object();
}

void expect_zero3_equals_zero0_weights(const std::string& model, const std::vector<std::string>& layout) {
  std::vector<std::string> z3 = {"--model", model, "--zero", "3"};
  std::vector<std::string> z0 = {"--model", model, "--zero", "0"};
  z3.insert(z3.end(), layout.begin(), layout.end());
  z0.insert(z0.end(), layout.begin(), layout.end());
  const auto a = train(z3), b = train(z0);
  ASSERT_TRUE(a.contains("ranks") && b.contains("ranks"));
  EXPECT_EQ(a["status"], "ok");
  for (const auto& c : a["checks"]) EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
  ASSERT_EQ(a["ranks"].size(), b["ranks"].size());
  for (size_t i = 0; i < a["ranks"].size(); ++i) {
    const auto& ra = a["ranks"][i];
    // The exact budget and the measurement agree, and both equal ZeRO 0's
    // weights (e·P_r): no second, gathered copy.
    EXPECT_EQ(ra["measured"]["peak_by_account"]["weights"], ra["analytic"]["exact"]["weights"]) << "rank " << i;
    EXPECT_EQ(ra["analytic"]["exact"]["weights"], b["ranks"][i]["analytic"]["exact"]["weights"]) << "rank " << i;
    EXPECT_EQ(ra["measured"]["peak_by_account"]["weights"], b["ranks"][i]["measured"]["peak_by_account"]["weights"])
        << "rank " << i;
  }
}

TEST(Zero3OneDataParallelRank, OneRankCpu) { expect_zero3_equals_zero0_weights("tiny-llama", {}); }

TEST(Zero3OneDataParallelRank, TensorParallelMeta) {
  expect_zero3_equals_zero0_weights("tiny-llama", {"--tp", "2", "--backend", "meta"});
  expect_zero3_equals_zero0_weights("tiny-llama", {"--tp", "2", "--sp", "--backend", "meta"});
}

TEST(Zero3OneDataParallelRank, PipelineMeta) {
  expect_zero3_equals_zero0_weights("tiny-llama", {"--pp", "2", "--backend", "meta"});
  // Tied embeddings on two stages: allowed with dp = 1 (nothing is sharded).
  expect_zero3_equals_zero0_weights("tiny-gpt", {"--pp", "2", "--backend", "meta"});
}

TEST(Zero3OneDataParallelRank, TensorAndPipelineMeta) {
  expect_zero3_equals_zero0_weights("tiny-llama", {"--tp", "2", "--pp", "2", "--backend", "meta"});
}

TEST(Zero3OneDataParallelRank, PrefetchChangesNothing) {
  expect_zero3_equals_zero0_weights("tiny-gpt", {"--prefetch", "2"});
}

}  // namespace
