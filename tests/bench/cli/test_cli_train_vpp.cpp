// CLI tests for `gpuledger train --vpp` (and `check` of its report) on the meta backend at a 405B-like
// layout (llama3.1-405b's shape with 128 layers, tp 8 × pp 16, vpp 8: one
// layer per model chunk), simulated for one rank per stage: every check
// passes (each account of each rank equals its exact budget to the byte, the
// p2p calls and bytes equal the analytic comm), and against the same run
// without interleaving a middle stage holds 141/120 of the activations —
// Megatron's warm-up: (16 − 1 − 1)·2 + (8 − 1)·16 + 1 = 141 one-layer chunks in
// flight against min(16 − 1, 32) = 15 microbatches of 8 layers — and sends 8
// times the messages: 32 microbatches × 8 chunks × 2 directions. The same
// layout over dp 2 with ZeRO 3, and tied gpt2-large with ZeRO 2/3 across
// interleaved stages, pass every check too.
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

// The same layout over dp 2 with ZeRO 3 (world 256, one rank per stage
// simulated): every check passes; each stage reduce-scatters each of its
// units after every microbatch's backward — 8 one-layer chunks, + the
// embedding on the first stage: 32·9 = 288 calls, a middle stage 32·8 = 256.
TEST(CliTrainVpp, Zero3At405BLikeLayoutBooksItsBudget) {
  std::vector<std::string> args = run_405b_like("8");
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == "--world") args[i + 1] = "256";
  for (const char* a : {"--dp", "2", "--zero", "3"}) args.push_back(a);
  auto r = run_cli(args);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = r.json();
  ASSERT_EQ(doc["ranks"].size(), 16u);
  for (const auto& c : doc["checks"]) EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
  EXPECT_EQ(doc["ranks"][0]["comm"]["reduce_scatter@dp"]["calls"], 32 * 9);
  EXPECT_EQ(doc["ranks"][1]["comm"]["reduce_scatter@dp"]["calls"], 32 * 8);
}

// Tied embeddings (gpt2-large, 36 layers) over tp 2 × pp 4 × vpp 3 × dp 4,
// ZeRO 2 and 3: every check passes; the first stage's embedding unit is
// reduce-scattered once, after the emb all-reduce of V'/t·h·g =
// 50,432/2·1280·2 bytes, its 9 layers every microbatch: 8·9 + 1 calls.
TEST(CliTrainVpp, TiedZero2And3AcrossStagesBookTheirBudget) {
  for (const char* zero : {"2", "3"}) {
    auto r = run_cli({"train", "--backend", "meta",  "--model", "gpt2-large", "--tp",   "2",  "--pp",
                      "4",     "--vpp",     "3",     "--dp",    "4",          "--zero", zero, "--world",
                      "32",    "--ranks",   "roles", "--seq",   "1024",       "--mbs",  "1",  "--microbatches",
                      "8",     "--steps",   "1",     "--json",  "-"});
    ASSERT_EQ(r.status, 0) << r.err;
    const auto doc = r.json();
    for (const auto& c : doc["checks"]) EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
    const auto& first = doc["ranks"][0];
    EXPECT_EQ(first["comm"]["all_reduce@emb"]["calls"], 1);
    EXPECT_EQ(first["comm"]["all_reduce@emb"]["bytes"], int64_t{50432} / 2 * 1280 * 2);
    EXPECT_EQ(first["comm"]["reduce_scatter@dp"]["calls"], 8 * 9 + 1);
  }
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
