// CLI test for `gpuledger train --cp` beside tensor, sequence and interleaved
// pipeline parallelism, on the meta backend at a smaller version of the 405B
// long-context layout (results/meta/, docs/formulas/context-parallel.md §7):
// llama3.1-405b's shape (126 layers) over tp 8 (sp) × cp 4 × pp 2 × vpp 7
// (world 64, seq 8192, 2 microbatches), one rank per stage simulated. Every
// check passes (each account of each rank equals its exact budget to the
// byte, every collective's calls and bytes equal the analytic comm, executed
// FLOPs equal the analytic count), and the figures are the formulas':
//   - a rank saves what one rank saves for s/cp tokens: its activations equal
//     those of the same layout at cp 1 and seq 8192/4 = 2048;
//   - the pipeline's messages carry the rank's s/cp tokens, a TP shard of
//     them: e·b·(s/cp)/t·h = 2·1·256·16384 bytes; the first stage sends
//     2·(7 + 6) = 26 of them (vpp 7 chunks toward the next virtual stage, 6
//     toward the previous);
//   - the ring of every stage passes one K/V block of the TP rank's one KV
//     head, B_kv = 2·1·2048·1·128·2 = 1 MiB: 63 layers × 2 microbatches ×
//     (3 forward + 4 backward messages) = 882 sends, 126·(3 + 6) MiB;
//   - stage 0 holds min((2 − 1)·2 + 6·2 + 1, 2·7) = 14 chunk-microbatches.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "run_cli.h"

using gpuledger::testing::run_cli;

namespace {

std::vector<std::string> run_405b_cp(const char* cp, const char* seq, const char* world) {
  return {"train",
          "--backend",
          "meta",
          "--model",
          "llama3.1-405b",
          "--tp",
          "8",
          "--cp",
          cp,
          "--pp",
          "2",
          "--vpp",
          "7",
          "--sp",
          "--world",
          world,
          "--seq",
          seq,
          "--mbs",
          "1",
          "--microbatches",
          "2",
          "--attention",
          "flash",
          "--ranks",
          "roles",
          "--steps",
          "1",
          "--json",
          "-"};
}

TEST(CliTrainCp, MetaSimulationOf405BLongContextLayoutBooksItsBudget) {
  auto r = run_cli(run_405b_cp("4", "8192", "64"));
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = r.json();
  EXPECT_EQ(doc["config"]["layout"]["cp"], 4);
  EXPECT_EQ(doc["config"]["layout"]["vpp"], 7);
  ASSERT_EQ(doc["ranks"].size(), 2u);
  ASSERT_GE(doc["checks"].size(), 2u * 9u);
  for (const auto& c : doc["checks"]) EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
  for (const auto& rank : doc["ranks"]) {
    for (auto a : {"weights", "grads", "master", "optim", "activations", "comm"})
      EXPECT_EQ(rank["measured"]["peak_by_account"][a], rank["analytic"]["exact"][a]) << rank["role"] << " " << a;
    EXPECT_EQ(rank["flops"]["executed_per_step"], rank["flops"]["analytic_hardware"]) << rank["role"];
    const int64_t msg = int64_t{2} * 256 * 16384;
    EXPECT_EQ(rank["comm"]["send@pp"]["calls"], 26) << rank["role"];
    EXPECT_EQ(rank["comm"]["send@pp"]["bytes"], 26 * msg) << rank["role"];
    EXPECT_EQ(rank["comm"]["send@cp"]["calls"], 882) << rank["role"];
    EXPECT_EQ(rank["comm"]["send@cp"]["bytes"], int64_t{126} * 9 * (1 << 20)) << rank["role"];
    EXPECT_EQ(rank["comm"]["recv@cp"], rank["comm"]["send@cp"]) << rank["role"];
  }
  EXPECT_EQ(doc["ranks"][0]["in_flight_microbatches"], 14);

  // the same ranks without the ring, at the rank's 2048 tokens: the same activations
  auto one = run_cli(run_405b_cp("1", "2048", "16"));
  ASSERT_EQ(one.status, 0) << one.err;
  const auto base = one.json();
  ASSERT_EQ(base["ranks"].size(), 2u);
  for (size_t i = 0; i < 2; ++i)
    EXPECT_EQ(doc["ranks"][i]["measured"]["peak_by_account"]["activations"],
              base["ranks"][i]["measured"]["peak_by_account"]["activations"])
        << i;
}

}  // namespace
