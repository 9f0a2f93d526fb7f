// `gpuledger train` of a mixture-of-experts model (tiny-moe) on one rank, on
// the cpu and meta backends: every check passes (the measured bytes of every
// account equal the exact budget with the MoE terms of analytic/moe.h, the
// executed FLOPs equal the analytic count), the loss falls; and what is not
// built yet is refused with exit 2 naming the problem.
#include <gtest/gtest.h>

#include "run_cli.h"

using gpuledger::testing::contains;
using gpuledger::testing::run_cli;

namespace {

void expect_checks_pass(const nlohmann::json& doc) {
  ASSERT_GE(doc["checks"].size(), 9u);
  for (const auto& c : doc["checks"]) EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
  const auto& rank = doc["ranks"][0];
  for (auto a : {"weights", "grads", "master", "optim", "activations"})
    EXPECT_EQ(rank["measured"]["peak_by_account"][a], rank["analytic"]["exact"][a]) << a;
  EXPECT_EQ(rank["flops"]["executed_per_step"], rank["flops"]["analytic_hardware"]);
}

TEST(CliTrainMoe, CpuPassesEveryCheckAndLearns) {
  auto r = run_cli({"train", "--model", "tiny-moe", "--seq", "16", "--mbs", "2", "--microbatches", "2", "--steps", "6",
                    "--lr", "0.01", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = r.json();
  EXPECT_EQ(doc["status"], "ok");
  expect_checks_pass(doc);
  EXPECT_EQ(doc["config"]["model"]["num_experts"], 4);
  const auto& loss = doc["summary"]["loss"];
  ASSERT_EQ(loss.size(), 6u);
  EXPECT_LT(loss[5].get<double>(), loss[0].get<double>());
}

TEST(CliTrainMoe, MetaPassesEveryCheck) {
  auto r = run_cli({"train", "--model", "tiny-moe", "--backend", "meta", "--seq", "16", "--mbs", "2", "--steps", "2",
                    "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  expect_checks_pass(r.json());
}

// plan of Mixtral 8x7B on one rank: the analytic side alone, with the 6·N_active row.
TEST(CliTrainMoe, PlanPrintsTheActiveParameterFlops) {
  auto r = run_cli({"plan", "--model", "mixtral-8x7b", "--seq", "4096"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "moe_6n_active")) << r.out;
}

TEST(CliTrainMoe, RefusesWhatIsNotBuilt) {
  for (const auto& extra : std::vector<std::vector<std::string>>{{"--dp", "2"}, {"--tp", "2"}, {"--pp", "2"}}) {
    std::vector<std::string> args = {"train", "--model", "tiny-moe", "--backend", "meta", "--seq", "16"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = run_cli(args);
    EXPECT_EQ(r.status, 2) << extra[0] << ": " << r.err;
    EXPECT_TRUE(contains(r.err, "expert parallelism is not implemented")) << r.err;
  }
  auto full = run_cli({"train", "--model", "tiny-moe", "--backend", "meta", "--seq", "16", "--recompute", "full"});
  EXPECT_EQ(full.status, 2) << full.err;
  EXPECT_TRUE(contains(full.err, "--recompute full")) << full.err;
  auto qwen = run_cli({"plan", "--model", "qwen3-30b-a3b", "--tp", "2"});  // QK norm runs at tp 1 only
  EXPECT_EQ(qwen.status, 2) << qwen.err;
  EXPECT_TRUE(contains(qwen.err, "QK norm")) << qwen.err;
}

// Qwen3-30B-A3B's shapes (QK norm, 128 experts, top-8) cut to 2 layers, on
// meta: the QK norm's γ, its saved Q, K and rstd and the experts in every
// account exactly as budgeted.
TEST(CliTrainMoe, Qwen3WithQkNormOnMetaPassesEveryCheck) {
  auto r = run_cli({"train", "--model", "qwen3-30b-a3b", "--layers", "2", "--backend", "meta", "--seq", "64", "--mbs",
                    "2", "--steps", "1", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = r.json();
  expect_checks_pass(doc);
  EXPECT_EQ(doc["config"]["model"]["qk_norm"], true);
}

}  // namespace
