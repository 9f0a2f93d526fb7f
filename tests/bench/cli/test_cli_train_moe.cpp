// `gpuledger train` of a mixture-of-experts model (tiny-moe) on one rank, on
// the cpu and meta backends: every check passes (the measured bytes of every
// account equal the exact budget with the MoE terms of analytic/moe.h, the
// executed FLOPs equal the analytic count), the loss falls; and what is not
// built yet is refused with exit 2 naming the problem.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "report_checks.h"
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

// Data and expert parallelism on meta, every rank simulated: each rank's
// accounts equal the exact budget (E/ep experts' weights, gradients, master
// and optimizer state; the E·C dispatch slots and buffers), its FLOPs the
// analytic count and its comm the analytic calls and bytes — the all-to-alls
// over ep, the dense gradients over dp, the expert gradients over the
// expert-data-parallel group (dp 8, ep 2: groups of 4; dp 4, ep 4: none).
TEST(CliTrainMoe, ExpertParallelOnMetaPassesEveryCheck) {
  for (auto [world, ep] : {std::pair{"8", "2"}, {"4", "4"}, {"2", "1"}}) {
    auto r = run_cli({"train", "--model", "tiny-moe", "--backend", "meta", "--world", world, "--ep",
                      ep,      "--ranks", "all",      "--seq",     "16",   "--mbs",   "2",   "--microbatches",
                      "2",     "--steps", "1",        "--json",    "-"});
    ASSERT_EQ(r.status, 0) << r.err;
    const auto doc = r.json();
    ASSERT_EQ(doc["ranks"].size(), static_cast<size_t>(std::stoi(world)));
    gpuledger::testing::expect_every_check_passes(doc);
    const auto& comm = doc["ranks"][0]["comm"];
    EXPECT_EQ(comm.contains("all_to_all@ep"), std::string(ep) != "1");
    EXPECT_EQ(comm.contains("all_reduce@edp"), std::string(world) == "8");
  }
}

// Mixtral-8x7B on meta at world 64: pp 2, dp 32, ep 8 (each rank one expert
// per layer, 16 layers per stage), one rank per stage simulated: every check
// passes; each rank makes 4·16·8 = 512 all-to-alls of E·C·h·e = 8·4096·4096·2
// bytes, its expert gradients (16 layers · 176,160,768 · 2 B) over the 4-rank
// expert-data-parallel group.
TEST(CliTrainMoe, MixtralPipelineAndExpertParallelOnMetaPassesEveryCheck) {
  auto r = run_cli(
      {"train", "--model", "mixtral-8x7b", "--backend", "meta", "--world",        "64", "--pp",    "2", "--ep",
       "8",     "--seq",   "4096",         "--mbs",     "1",    "--microbatches", "8",  "--steps", "1", "--json",
       "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = r.json();
  ASSERT_EQ(doc["ranks"].size(), 2u);
  ASSERT_GE(doc["checks"].size(), 40u);
  for (const auto& c : doc["checks"]) EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
  for (const auto& rank : doc["ranks"]) {
    EXPECT_EQ(rank["comm"]["all_to_all@ep"]["calls"], 512);
    EXPECT_EQ(rank["comm"]["all_to_all@ep"]["bytes"], int64_t{512} * 8 * 4096 * 4096 * 2);
    EXPECT_EQ(rank["comm"]["all_reduce@edp"]["bytes"], int64_t{16} * 176'160'768 * 2);
  }
}

// --capacity-factor: the experts work on E·C padded slots (C = ⌈c·N·k/E⌉),
// so every account is exact whatever the routing drops; the dropped choices
// are reported per step. On meta the router reads zeros: every token picks
// experts 0 and 1 (ties to the lower index), N = 32 tokens, c = 1: C = 16,
// 2·(32 − 16) = 32 choices dropped per layer and microbatch, 2 layers × 2
// microbatches: 128 per step, on every rank. On the cpu c = 0.5 (C = 8 of
// the 64 choices per layer and microbatch): at least 32 dropped each, 128 per step.
TEST(CliTrainMoe, CapacityFactorPassesEveryCheckAndReportsTheDrops) {
  for (const char* world : {"1", "4"}) {
    const std::string ep = std::string(world) == "1" ? "1" : "2";
    auto r = run_cli({"train", "--model",        "tiny-moe", "--backend",         "meta", "--world", world, "--ep",
                      ep,      "--ranks",        "all",      "--capacity-factor", "1",    "--seq",   "16",  "--mbs",
                      "2",     "--microbatches", "2",        "--steps",           "2",    "--json",  "-"});
    ASSERT_EQ(r.status, 0) << r.err;
    const auto doc = r.json();
    EXPECT_EQ(doc["config"]["model"]["capacity_factor"], 1.0);
    for (const auto& c : doc["checks"]) EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
    for (const auto& rank : doc["ranks"]) {
      for (auto a : {"weights", "grads", "master", "optim", "activations", "comm"})
        EXPECT_EQ(rank["measured"]["peak_by_account"][a], rank["analytic"]["exact"][a]) << a;
      EXPECT_EQ(rank["moe"]["dropped_choices_per_step"], nlohmann::json({128, 128}));
    }
  }
  const std::string path = gpuledger::testing::scratch_dir("moe-capacity") + "/cpu.json";
  auto cpu = run_cli({"train", "--model", "tiny-moe", "--capacity-factor", "0.5", "--seq", "16", "--mbs", "2",
                      "--microbatches", "2", "--steps", "2", "--json", path});
  ASSERT_EQ(cpu.status, 0) << cpu.err;
  const auto doc = gpuledger::testing::read_json(path);
  expect_checks_pass(doc);
  for (const auto& d : doc["ranks"][0]["moe"]["dropped_choices_per_step"]) EXPECT_GE(d.get<int64_t>(), 128);
  EXPECT_TRUE(contains(cpu.out, "MoE dropped choices / step")) << cpu.out;
  auto dense = run_cli({"plan", "--model", "tiny-llama", "--capacity-factor", "1"});
  EXPECT_EQ(dense.status, 2) << dense.err;
  EXPECT_TRUE(contains(dense.err, "--capacity-factor needs a mixture-of-experts model")) << dense.err;
  auto over = run_cli({"plan", "--model", "tiny-moe", "--capacity-factor", "5"});
  EXPECT_EQ(over.status, 2) << over.err;
  EXPECT_TRUE(contains(over.err, "must be null (no drops) or in (0, num_experts 4]")) << over.err;
}

// plan of Mixtral 8x7B on one rank: the analytic side alone, with the 6·N_active row.
TEST(CliTrainMoe, PlanPrintsTheActiveParameterFlops) {
  auto r = run_cli({"plan", "--model", "mixtral-8x7b", "--seq", "4096"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "moe_6n_active")) << r.out;
}

TEST(CliTrainMoe, RefusesWhatIsNotBuilt) {
  auto tp = run_cli({"train", "--model", "tiny-moe", "--backend", "meta", "--seq", "16", "--tp", "2"});
  EXPECT_EQ(tp.status, 2) << tp.err;
  EXPECT_TRUE(contains(tp.err, "with data, expert and pipeline parallelism only (tp = 1), got tp 2")) << tp.err;
  // expert parallelism: ep divides dp and the experts; a dense model has none
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--world", "6", "--ep", "4"}, "--ep 4 does not divide --dp 6"},
      {{"--world", "8", "--ep", "8"}, "--ep 8 does not divide the 4 experts of tiny-moe"}};
  for (const auto& [extra, message] : bad) {
    std::vector<std::string> args = {"train", "--model", "tiny-moe", "--backend", "meta", "--seq", "16"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = run_cli(args);
    EXPECT_EQ(r.status, 2) << message << ": " << r.err;
    EXPECT_TRUE(contains(r.err, message)) << r.err;
  }
  auto dense = run_cli({"plan", "--model", "tiny-llama", "--dp", "2", "--ep", "2"});
  EXPECT_EQ(dense.status, 2) << dense.err;
  EXPECT_TRUE(contains(dense.err, "--ep 2 needs a mixture-of-experts model")) << dense.err;
  auto qwen = run_cli({"plan", "--model", "qwen3-30b-a3b", "--tp", "2"});  // QK norm runs at tp 1 only
  EXPECT_EQ(qwen.status, 2) << qwen.err;
  EXPECT_TRUE(contains(qwen.err, "QK norm")) << qwen.err;
}

// ZeRO 1-3 with expert parallelism on meta (world 4, ep 2: the experts
// sharded over expert-data-parallel groups of 2, the rest over dp 4): every
// check passes, the budget of every account and the comm per collective and
// group (reduce_scatter and all_gather over edp among them) included.
TEST(CliTrainMoe, ZeroWithExpertParallelOnMetaPassesEveryCheck) {
  for (const char* zero : {"1", "2", "3"}) {
    auto r = run_cli({"train", "--model", "tiny-moe", "--backend", "meta", "--seq", "16", "--world", "4", "--ep", "2",
                      "--zero", zero, "--steps", "1", "--json", "-"});
    ASSERT_EQ(r.status, 0) << "zero " << zero << ": " << r.err;
    expect_checks_pass(r.json());
  }
}

// --recompute full (the backward re-runs each layer's forward, the router
// and, under ep, the dispatch and combine all-to-alls included), the
// optimizer offloaded under ep (each part's shard copied) and interleaved
// stages (--vpp 2) on meta: every check passes.
TEST(CliTrainMoe, FullRecomputeOffloadAndInterleavedStagesOnMetaPassEveryCheck) {
  const std::vector<std::vector<std::string>> runs = {
      {"--recompute", "full"},
      {"--recompute", "full", "--world", "4", "--ep", "2", "--zero", "3"},
      {"--world", "4", "--ep", "2", "--zero", "2", "--offload", "optimizer"},
      {"--world", "4", "--pp", "2", "--vpp", "2", "--ep", "2", "--layers", "4", "--microbatches", "4"}};
  for (const auto& extra : runs) {
    std::vector<std::string> args = {"train", "--model", "tiny-moe", "--backend", "meta", "--seq",
                                     "16",    "--steps", "1",        "--json",    "-"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = run_cli(args);
    ASSERT_EQ(r.status, 0) << extra.front() << ": " << r.err;
    expect_checks_pass(r.json());
  }
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

const std::string kModels = std::string(GPULEDGER_SOURCE_DIR) + "/tests/data/models/";

// DeepSeek-MoE's first dense layers (dense_layers 1 of 3) on the cpu: every
// check passes (the dense layer's unit, saved tensors and FLOPs beside the
// MoE layers') and the loss falls; on meta over 4 ranks with ep 2 and pp 2;
// infer on the cpu.
TEST(CliTrainMoe, FirstDenseLayersPassEveryCheck) {
  const std::string model = kModels + "tiny-deepseek-moe.json";
  auto cpu = run_cli({"train", "--model", model, "--seq", "16", "--mbs", "2", "--microbatches", "2", "--steps", "6",
                      "--lr", "0.01", "--json", "-"});
  ASSERT_EQ(cpu.status, 0) << cpu.err;
  const auto doc = cpu.json();
  expect_checks_pass(doc);
  EXPECT_EQ(doc["config"]["model"]["dense_layers"], 1);
  const auto& loss = doc["summary"]["loss"];
  EXPECT_LT(loss[5].get<double>(), loss[0].get<double>());
  auto meta =
      run_cli({"train", "--model", model, "--backend", "meta", "--world", "4", "--pp",   "2", "--ep", "2", "--layers",
               "4",     "--ranks", "all", "--seq",     "16",   "--steps", "1", "--json", "-"});
  ASSERT_EQ(meta.status, 0) << meta.err;
  for (const auto& c : meta.json()["checks"]) EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
  // context parallelism (cp 2 of world 4, full recompute): every check, and
  // the f_e counts over cp: 2 MoE layers × 1 microbatch × 2 forwards, 4·4 B each
  auto cp = run_cli({"train", "--model", model,         "--backend", "meta",        "--world", "4",
                     "--cp",  "2",       "--attention", "flash",     "--recompute", "full",    "--ranks",
                     "all",   "--seq",   "16",          "--steps",   "1",           "--json",  "-"});
  ASSERT_EQ(cp.status, 0) << cp.err;
  const auto cpdoc = cp.json();
  for (const auto& c : cpdoc["checks"]) EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
  EXPECT_EQ(cpdoc["ranks"][0]["comm"]["all_reduce@cp"]["calls"], 4);
  EXPECT_EQ(cpdoc["ranks"][0]["comm"]["all_reduce@cp"]["bytes"], 64);
  // infer: the decode weight bytes count the experts of the 2 MoE layers only
  auto infer = run_cli({"infer", "--model", model, "--device-memory", "1GiB", "--dtype", "fp32", "--json", "-"});
  ASSERT_EQ(infer.status, 0) << infer.err;
  const auto inf = infer.json();
  EXPECT_EQ(inf["summary"]["moe"]["layers"], 2) << inf["summary"]["moe"].dump();
  for (const auto& c : inf["checks"]) EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
}

// DeepSeek-V3's MoE (61 layers, the first 3 dense of ffn 18432, 256 experts
// of 2048, top 8 of sigmoid scores with the expert bias, one shared expert; standard attention of 128 heads of 128
// in place of its latent attention: tests/data/models/deepseek-v3-mha.json)
// cut to 60 layers, on meta at world 64 = pp 4 × dp 16, ep 8; one rank per
// stage simulated. Stage 0 holds the 3 dense layers and 12 MoE layers, with
// 32 of the 256 experts each. Its weights, by hand (h 7168, bf16):
//   embedding 129280·7168 = 926,679,040
//   dense layer: norms 2·7168, QKV 7168·3·16384, out 16384·7168, MLP
//     3·7168·18432 = 14,336 + 352,321,536 + 117,440,512 + 396,361,728 = 866,138,112
//   MoE layer: norms and attention 469,776,384; router 256·7168 = 1,835,008;
//     32 experts 32·3·7168·2048 = 1,409,286,144; shared 3·7168·2048 =
//     44,040,192: 1,924,937,728
//   926,679,040 + 3·866,138,112 + 12·1,924,937,728 = 26,624,346,112 params,
//   53,248,692,224 B; and the 12 MoE layers' expert bias (sigmoid router,
//   DeepSeek-V3's aux-loss-free balancing), 12·256 fp32 = 12,288 B:
//   53,248,704,512 B.
// All-to-alls over ep: 4 per MoE layer and microbatch, 8 microbatches: 384 on
// stage 0 (12 MoE layers), 480 on the others (15); each E·C·h·e =
// 256·4096·7168·2 = 15,032,385,536 B (dropless: C = N = 4096).
TEST(CliTrainMoe, DeepSeekV3MoeAtPipelineAndExpertParallelOnMetaPassesEveryCheck) {
  auto r = run_cli({"train",     "--model",  kModels + "deepseek-v3-mha.json",
                    "--backend", "meta",     "--world",
                    "64",        "--layers", "60",
                    "--pp",      "4",        "--ep",
                    "8",         "--seq",    "4096",
                    "--mbs",     "1",        "--microbatches",
                    "8",         "--steps",  "1",
                    "--json",    "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = r.json();
  ASSERT_EQ(doc["ranks"].size(), 4u);
  ASSERT_GE(doc["checks"].size(), 90u);
  for (const auto& c : doc["checks"]) EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
  EXPECT_EQ(doc["ranks"][0]["measured"]["peak_by_account"]["weights"], int64_t{53'248'704'512});
  for (const auto& rank : doc["ranks"]) {
    const int64_t calls = rank["rank"] == 0 ? 384 : 480;
    EXPECT_EQ(rank["comm"]["all_to_all@ep"]["calls"], calls);
    EXPECT_EQ(rank["comm"]["all_to_all@ep"]["bytes"], calls * int64_t{15'032'385'536});
    EXPECT_EQ(rank["flops"]["executed_per_step"], rank["flops"]["analytic_hardware"]);
  }
  // the expert bias's load counts over dp (16 ranks), once per step: 12 or 15 MoE layers × 256 fp32
  EXPECT_EQ(doc["ranks"][0]["analytic"]["comm"]["all_reduce@dp"]["calls"],
            doc["ranks"][0]["comm"]["all_reduce@dp"]["calls"]);
}

// The workspace bound's term (e) of docs/exact-budget.md: under ep a MoE
// block's backward holds its rows' gradients. wide-moe (h 32, 64 experts of
// f_e 24, top-2), dp 2 × ep 2, b·s = 2·64 = 128 tokens, bf16: dropless under
// ep pads every expert to C = N = 128 slots, A = 64·128 = 8192 rows, and the
// term is 2·8192·(32 + 24) = 917,504 B. The measured peak needs it: it lies
// above the bound without the term, and within the bound with it.
TEST(CliTrainMoe, ExpertParallelBackwardWorkspaceIsBounded) {
  auto r = run_cli({"train",
                    "--model",
                    kModels + "wide-moe.json",
                    "--backend",
                    "meta",
                    "--world",
                    "2",
                    "--dp",
                    "2",
                    "--ep",
                    "2",
                    "--seq",
                    "64",
                    "--mbs",
                    "2",
                    "--microbatches",
                    "1",
                    "--attention",
                    "materialized",
                    "--recompute",
                    "full",
                    "--steps",
                    "1",
                    "--json",
                    "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = r.json();
  expect_checks_pass(doc);
  const auto& rank = doc["ranks"][0];
  const int64_t measured = rank["measured"]["peak_by_account"]["workspace"];
  const int64_t bound = rank["analytic"]["exact"]["workspace"];
  const int64_t term = 2LL * 64 * 128 * (32 + 24);
  EXPECT_EQ(term, 917'504);
  EXPECT_LE(measured, bound);
  EXPECT_GT(measured, bound - term);
}

}  // namespace
