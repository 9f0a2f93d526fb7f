// CLI tests of --dtype fp8 (docs/formulas/fp8.md):
//   - train on meta, llama3-8b cut to 2 layers: every check passes (each
//     account equals its exact budget to the byte, FLOPs equal the analytic
//     count) and the weights account holds, beyond the bf16 run's, the FP8
//     state by hand: per layer Σ P_g = 6144·4096 + 4096·4096 + 3·14336·4096 =
//     218,103,808, 2·Σ P_g + 5·(4 + 5·4·1025) = 436,310,136 bytes, 2 layers;
//   - the report names the recipe, and `check` re-derives its budget;
//   - plan on h100-sxm takes MFU's peak from the FP8 dense figure (1,978.9 T);
//   - deepseek-v3 (MLA, MoE) in FP8 by both recipes under ep × pp: every check;
//   - refusals (exit 2, naming the problem): an Ampere device, the cuda
//     backend, kv, infer, --zero 3, an unknown recipe.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "run_cli.h"

using gpuledger::testing::contains;
using gpuledger::testing::run_cli;

namespace {

std::vector<std::string> meta_8b(const char* dtype) {
  return {"train", "--backend",      "meta", "--model", "llama3-8b", "--layers", "2",   "--seq",  "1024", "--mbs",
          "1",     "--microbatches", "2",    "--steps", "1",         "--dtype",  dtype, "--json", "-"};
}

TEST(CliFp8, MetaTrainBooksTheFp8StateByHandAndPassesItsChecks) {
  const auto fp8 = run_cli(meta_8b("fp8")), bf16 = run_cli(meta_8b("bf16"));
  ASSERT_EQ(fp8.status, 0) << fp8.err;
  ASSERT_EQ(bf16.status, 0) << bf16.err;
  const auto a = fp8.json(), b = bf16.json();
  EXPECT_EQ(a["config"]["run"]["dtype"], "bf16");
  EXPECT_EQ(a["config"]["run"]["fp8"]["recipe"], "delayed");
  EXPECT_EQ(a["config"]["run"]["fp8"]["amax_history_len"], 1024);
  EXPECT_FALSE(b["config"]["run"].contains("fp8"));
  for (const auto& c : a["checks"]) EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
  const auto& ra = a["ranks"][0];
  const auto& rb = b["ranks"][0];
  const int64_t per_layer = 2 * int64_t{218103808} + 5 * (4 + 5 * 4 * 1025);
  EXPECT_EQ(per_layer, 436310136);
  EXPECT_EQ(ra["measured"]["peak_by_account"]["weights"].get<int64_t>() -
                rb["measured"]["peak_by_account"]["weights"].get<int64_t>(),
            2 * per_layer);
  EXPECT_EQ(ra["analytic"]["exact"]["weights"], ra["measured"]["peak_by_account"]["weights"]);
  for (auto acc : {"grads", "master", "optim", "activations", "comm"})
    EXPECT_EQ(ra["measured"]["peak_by_account"][acc], rb["measured"]["peak_by_account"][acc]) << acc;
  EXPECT_EQ(ra["flops"]["executed_per_step"], rb["flops"]["executed_per_step"]);
}

// DeepSeek-V3's shape (MLA, 3 dense layers then MoE with the expert bias)
// cut to 8 layers, at ep 16 × pp 4 × dp 16 with ZeRO 1, in FP8 by both
// recipes: every check passes (the experts' and MLA's FP8 state booked as the
// budget says), the block-wise report names its recipe and `check` re-derives it.
TEST(CliFp8, DeepSeekV3TrainsInFp8UnderExpertAndPipelineParallelism) {
  const std::string dir = gpuledger::testing::scratch_dir("cli_fp8_dsv3");
  for (const char* recipe : {"delayed", "blockwise"}) {
    const std::string out = dir + "/" + recipe + ".json";
    const auto r = run_cli({"train",
                            "--backend",
                            "meta",
                            "--model",
                            "deepseek-v3",
                            "--layers",
                            "8",
                            "--world",
                            "64",
                            "--pp",
                            "4",
                            "--ep",
                            "16",
                            "--dp",
                            "16",
                            "--zero",
                            "1",
                            "--seq",
                            "1024",
                            "--mbs",
                            "1",
                            "--microbatches",
                            "4",
                            "--attention",
                            "materialized",
                            "--recompute",
                            "full",
                            "--steps",
                            "1",
                            "--dtype",
                            "fp8",
                            "--fp8-recipe",
                            recipe,
                            "--memory-limit",
                            "1TiB",
                            "--json",
                            out});
    ASSERT_EQ(r.status, 0) << recipe << ": " << r.err;
    const auto doc = gpuledger::testing::read_json(out);
    EXPECT_EQ(doc["config"]["run"]["fp8"]["recipe"], recipe);
    ASSERT_GT(doc["checks"].size(), 60u);
    for (const auto& c : doc["checks"]) EXPECT_TRUE(c["ok"].get<bool>()) << recipe << " " << c.dump();
    const auto c = run_cli({"check", out});
    EXPECT_EQ(c.status, 0) << recipe << ": " << c.out << c.err;
  }
}

TEST(CliFp8, CheckRederivesTheFp8Report) {
  const std::string dir = gpuledger::testing::scratch_dir("cli_fp8");
  auto args = meta_8b("fp8");
  args.back() = dir + "/train.json";
  const auto t = run_cli(args);
  ASSERT_EQ(t.status, 0) << t.err;
  const auto c = run_cli({"check", dir + "/train.json"});
  EXPECT_EQ(c.status, 0) << c.out << c.err;
}

TEST(CliFp8, PlanTakesMfuAgainstTheFp8Peak) {
  const auto r = run_cli({"plan", "--model", "llama3-8b", "--dtype", "fp8", "--device", "h100-sxm", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = r.json();
  const std::string dump = doc.dump();
  EXPECT_TRUE(contains(dump, "\"peak_flops\":1.9789e+15")) << dump.substr(0, 2000);
  EXPECT_TRUE(contains(dump, "FP8 1,978.9 TFLOPS dense"));
}

// The predicted step on h100-sxm prices the Linear GEMMs at the FP8 rate and
// takes MFU against the FP8 peak: MFU = model FLOPs / (step · 1,978.9 T · devices).
// The GEMMs of the simulated trace take less time than bf16's (the LM head
// stays bf16); the casts and C conversions of the emulation are priced as they
// run (docs/formulas/fp8.md "Predicted step").
double gemm_ms(const std::string& trace) {
  double us = 0;
  const auto doc = gpuledger::testing::read_json(trace);
  for (const auto& e : doc["traceEvents"])
    if (e.value("ph", "") == "X" && e.value("name", "") == "gemm") us += e["dur"].get<double>();
  return us / 1e3;
}

TEST(CliFp8, PredictedStepRunsTheLinearGemmsAtTheFp8Rate) {
  const std::string dir = gpuledger::testing::scratch_dir("cli_fp8_predict");
  auto fp8_args = meta_8b("fp8"), bf16_args = meta_8b("bf16");
  for (auto* a : {&fp8_args, &bf16_args}) {
    const std::string dtype = a == &fp8_args ? "fp8" : "bf16";
    a->insert(a->end() - 2, {"--device", "h100-sxm", "--trace", dir + "/" + dtype + ".trace.json"});
  }
  const auto fp8 = run_cli(fp8_args), bf16 = run_cli(bf16_args);
  ASSERT_EQ(fp8.status, 0) << fp8.err;
  ASSERT_EQ(bf16.status, 0) << bf16.err;
  const auto a = fp8.json()["prediction"], b = bf16.json()["prediction"];
  EXPECT_DOUBLE_EQ(a["peak_flops_per_device"].get<double>(), 1978.9e12);
  EXPECT_DOUBLE_EQ(b["peak_flops_per_device"].get<double>(), 989.4e12);
  const double step_s = a["step_ms"].get<double>() / 1e3;
  EXPECT_NEAR(a["mfu"].get<double>(), a["model_flops_per_step"].get<double>() / (step_s * 1978.9e12), 1e-12);
  EXPECT_LE(a["mfu"].get<double>(), 1.0);
  const double fp8_gemm = gemm_ms(dir + "/fp8.trace.json"), bf16_gemm = gemm_ms(dir + "/bf16.trace.json");
  EXPECT_GT(bf16_gemm, 0);
  EXPECT_LT(fp8_gemm, 0.9 * bf16_gemm) << fp8_gemm << " ms vs " << bf16_gemm << " ms";
}

TEST(CliFp8, Refusals) {
  auto a100 = run_cli({"plan", "--model", "llama3-8b", "--dtype", "fp8", "--device", "a100-80gb"});
  EXPECT_EQ(a100.status, 2);
  EXPECT_TRUE(contains(a100.err, "no FP8 tensor cores")) << a100.err;
  auto cuda = run_cli({"train", "--backend", "cuda", "--model", "tiny-llama", "--dtype", "fp8", "--steps", "1"});
  EXPECT_EQ(cuda.status, 2);
  EXPECT_TRUE(contains(cuda.err, "--backend cuda")) << cuda.err;
  auto kv = run_cli({"kv", "--model", "llama3-8b", "--dtype", "fp8", "--device", "h100-sxm"});
  EXPECT_EQ(kv.status, 2);
  EXPECT_TRUE(contains(kv.err, "training precision")) << kv.err;
  auto infer = run_cli({"infer", "--model", "tiny-llama", "--dtype", "fp8"});
  EXPECT_EQ(infer.status, 2);
  EXPECT_TRUE(contains(infer.err, "training precision")) << infer.err;
  // MoE and MLA models run in fp8 (their experts' and projections' GEMMs FP8)
  for (const char* model : {"tiny-moe", "tiny-mla"}) {
    auto r = run_cli({"plan", "--model", model, "--dtype", "fp8"});
    EXPECT_EQ(r.status, 0) << model << ": " << r.err;
  }
  auto zero3 = run_cli({"plan", "--model", "tiny-llama", "--dtype", "fp8", "--dp", "2", "--zero", "3"});
  EXPECT_EQ(zero3.status, 2);
  EXPECT_TRUE(contains(zero3.err, "--zero 3")) << zero3.err;
  auto recipe = run_cli({"plan", "--model", "tiny-llama", "--dtype", "fp8", "--fp8-recipe", "mxfp8"});
  EXPECT_EQ(recipe.status, 2);
  EXPECT_TRUE(contains(recipe.err, "--fp8-recipe")) << recipe.err;
}

}  // namespace
