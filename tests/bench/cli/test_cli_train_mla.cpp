// `gpuledger train` and `plan` of multi-head latent attention models
// (docs/formulas/mla.md "Training"): every check passes — each account equal
// to the exact budget (the MLA rows of analytic/mla.h), the executed FLOPs
// equal to the analytic count, the communication equal to its budget (the
// TP-partial gradients of the down projections and latent norms included):
//  - tiny-mla on the cpu and meta backends under each recompute mode, and
//    without its query latent (q_lora_rank 0);
//  - a dense model of DeepSeek-V2-Lite's attention (tests/data/mla_dense_v2_lite.json)
//    on meta at 48 ranks: dp 4 × tp 4 (sp) × pp 3, ZeRO 1, 4,096 tokens;
//  - a dense model of DeepSeek-V3's attention (with its query latent, tests/data/mla_dense_v3.json),
//    8 of its layers at 64 ranks: dp 2 × tp 8 (sp) × pp 4, under each recompute mode.
// MPI runs of tiny-mla: test_cli_train_mpi.cpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "report_checks.h"
#include "run_cli.h"

using gpuledger::testing::expect_every_check_passes;
using gpuledger::testing::run_cli;

namespace {

const std::string kDataDir = std::string(GPULEDGER_SOURCE_DIR) + "/tests/data/";

TEST(CliTrainMla, TinyOnCpuAndMetaPassesEveryCheckUnderEachRecompute) {
  for (const std::string& model : {std::string("tiny-mla"), kDataDir + "tiny_mla_direct_query.json"}) {
    for (const char* backend : {"cpu", "meta"}) {
      for (const char* rc : {"none", "selective", "full"}) {
        SCOPED_TRACE(model + " " + backend + " " + rc);
        auto r = run_cli({"train", "--model", model, "--backend", backend, "--seq", "16", "--mbs", "2",
                          "--microbatches", "2", "--recompute", rc, "--steps", "3", "--json", "-"});
        ASSERT_EQ(r.status, 0) << r.err;
        const auto doc = r.json();
        expect_every_check_passes(doc);
        if (std::string(backend) == "cpu") {  // it learns
          const auto& loss = doc["summary"]["loss"];
          EXPECT_LT(loss[2].get<double>(), loss[0].get<double>());
        }
      }
    }
  }
}

// 27 layers over 3 stages, one rank per stage simulated: every check passes,
// and plan gives each account the same figure train measured.
TEST(CliTrainMla, DenseV2LiteAttentionAtFortyEightRanksOnMetaPassesEveryCheck) {
  const std::vector<std::string> layout = {"--model",   kDataDir + "mla_dense_v2_lite.json",
                                           "--dp",      "4",
                                           "--tp",      "4",
                                           "--pp",      "3",
                                           "--sp",      "--zero",
                                           "1",         "--seq",
                                           "4096",      "--mbs",
                                           "1",         "--microbatches",
                                           "8",         "--recompute",
                                           "selective", "--device",
                                           "h100-sxm"};
  std::vector<std::string> train = {"train", "--backend", "meta", "--world", "48", "--steps", "1", "--json", "-"};
  train.insert(train.end(), layout.begin(), layout.end());
  auto r = run_cli(train);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = r.json();
  ASSERT_EQ(doc["ranks"].size(), 3u);
  expect_every_check_passes(doc);

  std::vector<std::string> plan = {"plan", "--json", "-"};
  plan.insert(plan.end(), layout.begin(), layout.end());
  auto p = run_cli(plan);
  ASSERT_EQ(p.status, 0) << p.err;
  const auto pdoc = p.json();
  for (size_t i = 0; i < 3; ++i)
    for (auto a : {"weights", "grads", "master", "optim", "activations", "comm"})
      EXPECT_EQ(pdoc["ranks"][i]["analytic"]["exact"][a], doc["ranks"][i]["measured"]["peak_by_account"][a]) << a;
}

TEST(CliTrainMla, DenseV3AttentionAtSixtyFourRanksOnMetaPassesEveryCheck) {
  for (const char* rc : {"none", "selective", "full"}) {
    SCOPED_TRACE(rc);
    auto r = run_cli({"train",
                      "--model",
                      kDataDir + "mla_dense_v3.json",
                      "--layers",
                      "8",
                      "--backend",
                      "meta",
                      "--world",
                      "64",
                      "--dp",
                      "2",
                      "--tp",
                      "8",
                      "--pp",
                      "4",
                      "--sp",
                      "--zero",
                      "1",
                      "--seq",
                      "4096",
                      "--mbs",
                      "1",
                      "--microbatches",
                      "8",
                      "--recompute",
                      rc,
                      "--steps",
                      "1",
                      "--json",
                      "-"});
    ASSERT_EQ(r.status, 0) << r.err;
    const auto doc = r.json();
    ASSERT_EQ(doc["ranks"].size(), 4u);
    expect_every_check_passes(doc);
  }
}

}  // namespace
