// CLI tests for `gpuledger train --vpp` (and `check` of its report) on the meta backend at a 405B-like
// layout (llama3.1-405b's shape with 128 layers, tp 8 × pp 16, vpp 8: one
// layer per model chunk), simulated for one rank per stage: every check
// passes (each account of each rank equals its exact budget to the byte, the
// p2p calls and bytes equal the analytic comm), and against the same run
// without interleaving a middle stage holds 141/120 of the activations —
// Megatron's warm-up: (16 − 1 − 1)·2 + (8 − 1)·16 + 1 = 141 one-layer chunks in
// flight against min(16 − 1, 32) = 15 microbatches of 8 layers — and sends 8
// times the messages: 32 microbatches × 8 chunks × 2 directions.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "run_cli.h"

using gpuledger::testing::run_cli;

namespace {

std::vector<std::string> run_405b_like(const char* vpp) {
  return {"train", "--backend", "meta",  "--model", "llama3.1-405b",  "--layers", "128",     "--tp",    "8",
          "--pp",  "16",        "--vpp", vpp,       "--sp",           "--world",  "128",     "--ranks", "roles",
          "--seq", "8192",      "--mbs", "1",       "--microbatches", "32",       "--steps", "1",       "--json",
          "-"};
}

TEST(CliTrainVpp, MetaSimulationAt405BLikeLayoutBooksItsBudget) {
  auto r = run_cli(run_405b_like("8"));
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = r.json();
  EXPECT_EQ(doc["config"]["layout"]["vpp"], 8);
  ASSERT_EQ(doc["ranks"].size(), 16u);
  ASSERT_GE(doc["checks"].size(), 16u * 9u);
  for (const auto& c : doc["checks"]) EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
  for (const auto& rank : doc["ranks"])
    for (auto a : {"weights", "grads", "master", "optim", "activations", "comm"})
      EXPECT_EQ(rank["measured"]["peak_by_account"][a], rank["analytic"]["exact"][a]) << rank["role"] << " " << a;

  auto plain = run_cli(run_405b_like("1"));
  ASSERT_EQ(plain.status, 0) << plain.err;
  const auto one = plain.json();
  const auto& mid = doc["ranks"][1];
  const auto& mid1 = one["ranks"][1];
  EXPECT_EQ(mid["in_flight_microbatches"], 141);
  EXPECT_EQ(mid1["in_flight_microbatches"], 15);
  const int64_t act = mid["measured"]["peak_by_account"]["activations"].get<int64_t>();
  const int64_t act1 = mid1["measured"]["peak_by_account"]["activations"].get<int64_t>();
  EXPECT_EQ(act * 120, act1 * 141);
  // b·s/t·h·e = 1·1024·16384·2 bytes a message; 2·32·8 sends (2·32 without interleaving)
  EXPECT_EQ(mid["comm"]["send@pp"]["calls"], 512);
  EXPECT_EQ(mid["comm"]["send@pp"]["bytes"], int64_t{512} * 1024 * 16384 * 2);
  EXPECT_EQ(mid1["comm"]["send@pp"]["calls"], 64);
  // every rank all four pipeline buffers (a ring), against two at the ends
  EXPECT_EQ(doc["ranks"][0]["measured"]["peak_by_account"]["comm"], int64_t{4} * 1024 * 16384 * 2);
  EXPECT_EQ(one["ranks"][0]["measured"]["peak_by_account"]["comm"], int64_t{2} * 1024 * 16384 * 2);
}

// `check` re-derives the budget from the report's config, vpp included (a
// report read as vpp 1 would miss every stage's activations and comm).
TEST(CliTrainVpp, CheckRederivesTheInterleavedBudget) {
  const std::string path = gpuledger::testing::scratch_dir("vpp") + "/vpp.json";
  auto args = run_405b_like("8");
  args.back() = path;
  auto r = run_cli(args);
  ASSERT_EQ(r.status, 0) << r.err;
  auto c = run_cli({"check", path});
  EXPECT_EQ(c.status, 0) << c.out << c.err;
  EXPECT_NE(c.out.find(" 0 failed"), std::string::npos) << c.out;
}

TEST(CliTrainVpp, RefusedLayoutsExitTwoNamingTheProblem) {
  auto r = run_cli({"train", "--backend", "meta", "--model", "tiny-llama", "--pp", "2", "--vpp", "2", "--world", "2",
                    "--microbatches", "2", "--steps", "1"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--pp 2 · --vpp 2 does not divide layers 2"), std::string::npos) << r.err;
  r = run_cli({"train", "--backend", "meta", "--model", "tiny-llama", "--layers", "4", "--pp", "2", "--vpp", "2",
               "--world", "2", "--microbatches", "3", "--steps", "1"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("multiple of --pp 2"), std::string::npos) << r.err;
}

}  // namespace
