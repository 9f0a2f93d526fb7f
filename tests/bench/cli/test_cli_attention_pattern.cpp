// CLI tests of models whose layers attend differently (core/attention_pattern.h):
// the hybrid presets' parameter counts; `kv` sizing each layer's cache (the
// gemma-3-27b figures worked by hand in docs/formulas/kv.md); a bad pattern
// and `infer` of a hybrid model refused with exit 2 naming the field.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "run_cli.h"

using gpuledger::testing::contains;
using gpuledger::testing::run_cli;
using gpuledger::testing::scratch_dir;
using gpuledger::testing::write_file;

namespace {

// Ψ of each hybrid preset as this implementation holds it: the published
// counts, tensor by tensor from the configs (docs/formulas/kv.md "Presets of
// hybrid models"). gpt-oss's include per layer the o_proj bias 2880, the sinks
// 64, the router bias E and the expert biases E × (2·2880 + 2880): without
// them the presets would hold 116,789,232,960 and 20,908,050,240.
TEST(CliHybridModels, PresetParameterCounts) {
  auto r = run_cli({"models", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  std::map<std::string, int64_t> params;
  const auto doc = r.json();
  for (const auto& m : doc["models"]) params[m["name"]] = m["params"];
  EXPECT_EQ(params.at("gemma-3-27b"), 27'009'346'304);    // the published total: every tensor held
  EXPECT_EQ(params.at("gpt-oss-120b"), 116'829'156'672);  // the published totals (the model card's 116.83B, 20.91B)
  EXPECT_EQ(params.at("gpt-oss-20b"), 20'914'757'184);
  EXPECT_EQ(116'829'156'672 - 36 * (2880 + 64 + 128 + 128 * 8640), 116'789'232'960);
}

// docs/formulas/kv.md worked example: 62 layers, 16 KV heads of 128 values,
// bf16: one layer's K and V of one token are 2 · 16 · 128 · 2 = 8192 bytes.
// At 32768 tokens the 10 global layers keep 32768 tokens, the 52 local ones 1024.
TEST(CliHybridModels, Gemma3KvPerLayer) {
  auto r = run_cli({"kv", "--model", "gemma-3-27b", "--context", "32768", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = r.json();
  const auto rank = doc["ranks"][0];
  EXPECT_EQ(rank["kv_bytes_per_token"], 62 * 8192);
  EXPECT_EQ(rank["per_sequence"]["token_bytes"], 10LL * 32768 * 8192 + 52LL * 1024 * 8192);
  EXPECT_EQ(rank["per_sequence"]["token_bytes"], 3'120'562'176);
  // Paged, block 16: vLLM's groups of 10 layers, 1 global + 6 local; a block is
  // 16 · 10 · 8192 bytes; 2048 + 6 · 64 blocks per sequence.
  EXPECT_EQ(rank["per_sequence"]["reserved_bytes"], (2048LL + 6 * 64) * 16 * 10 * 8192);
  EXPECT_EQ(rank["per_sequence"]["reserved_bytes"], 3'187'671'040);
  // Contiguous: the reservation is each layer's own.
  auto c = run_cli({"kv", "--model", "gemma-3-27b", "--context", "32768", "--kv", "contiguous", "--max-model-len",
                    "32768", "--json", "-"});
  ASSERT_EQ(c.status, 0) << c.err;
  EXPECT_EQ(c.json()["ranks"][0]["per_sequence"]["reserved_bytes"], 3'120'562'176);
}

// serve-plan reads each sequence's K/V at its mean decode context n = prompt +
// output / 2 = 8500 tokens: a local layer keeps 1024 of them, so the per-sequence
// decode time is (10 · 8500 + 52 · 1024) / (62 · 8500) of the same model's with
// every layer global (analytic/serving_plan.h kv_kept_tokens).
TEST(CliHybridModels, ServePlanReadsEachLayersWindow) {
  const std::string dir = scratch_dir("attn_pattern_serve");
  const std::string full = dir + "/gemma-full.json";
  write_file(full, R"({"name": "gemma-full", "flavour": "llama", "layers": 62, "hidden": 5376, "heads": 32,
                       "kv_heads": 16, "head_dim": 128, "ffn": 21504, "vocab": 262208, "max_seq": 131072,
                       "tied_embeddings": true, "norm_eps": 1e-6, "rope_theta": 1000000.0, "qk_norm": true})");
  auto decode_per_seq = [](const std::string& model) {
    auto r = run_cli({"serve-plan", "--model", model, "--qps", "2", "--prompt-tokens", "8000", "--output-tokens",
                      "1000", "--devices", "h100-sxm", "--json", "-"});
    EXPECT_EQ(r.status, 0) << r.err;
    const auto doc = r.json();
    return doc["devices"][0]["single"]["decode_per_seq_s"].get<double>();
  };
  const double hybrid = decode_per_seq("gemma-3-27b"), dense = decode_per_seq(full);
  EXPECT_NEAR(hybrid / dense, (10.0 * 8500 + 52.0 * 1024) / (62.0 * 8500), 1e-12);
}

// Two pipeline stages of a 4-layer model, one local and one global layer
// each, hold the same; with the pattern [8, full, full, full] they differ.
TEST(CliHybridModels, KvPerStageFollowsItsLayers) {
  const std::string dir = scratch_dir("attn_pattern_kv");
  const std::string path = dir + "/h.json";
  write_file(path, R"({"name": "h", "flavour": "llama", "layers": 4, "hidden": 64, "heads": 4, "kv_heads": 2,
                       "head_dim": 16, "ffn": 128, "vocab": 256, "max_seq": 64,
                       "attention_pattern": [8, "full", "full", "full"]})");
  auto r = run_cli({"kv", "--model", path, "--context", "32", "--pp", "2", "--kv", "contiguous", "--max-model-len",
                    "64", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = r.json();
  const auto ranks = doc["ranks"];
  ASSERT_EQ(ranks.size(), 2u);
  // One layer-token of K and V: 2 · 2 · 16 · 2 = 128 bytes. Stage 0: layers 0
  // (window 8) and 1; stage 1: layers 2 and 3.
  EXPECT_EQ(ranks[0]["per_sequence"]["token_bytes"], (8 + 32) * 128);
  EXPECT_EQ(ranks[1]["per_sequence"]["token_bytes"], (32 + 32) * 128);
  EXPECT_EQ(ranks[0]["per_sequence"]["reserved_bytes"], (8 + 64) * 128);
  EXPECT_EQ(ranks[1]["per_sequence"]["reserved_bytes"], (64 + 64) * 128);
}

// Training a hybrid preset on the meta backend: every layer under its own
// window, the ledger equal to the exact budget to the byte and the FLOPs
// executed equal to the analytic ones (the checks), and the report's model
// carrying the pattern cut to the layers run.
TEST(CliHybridModels, MetaTrainMatchesTheBudget) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--model", "gemma-3-27b", "--layers", "6", "--seq", "2048", "--attention", "flash"},
           {"--model", "gpt-oss-20b", "--layers", "2", "--seq", "512", "--recompute", "selective"}}) {
    std::vector<std::string> cmd = {"train", "--backend", "meta", "--mbs",  "1", "--microbatches",
                                    "2",     "--steps",   "1",    "--json", "-"};
    cmd.insert(cmd.end(), args.begin(), args.end());
    auto r = run_cli(cmd);
    ASSERT_EQ(r.status, 0) << r.err;
    const auto doc = r.json();
    ASSERT_FALSE(doc["checks"].empty());
    for (const auto& c : doc["checks"]) EXPECT_TRUE(c["ok"].get<bool>()) << args[1] << " " << c.dump();
    EXPECT_TRUE(doc["config"]["model"].contains("attention_pattern")) << args[1];
  }
}

TEST(CliHybridModels, BadPatternIsExit2NamingTheField) {
  const std::string dir = scratch_dir("attn_pattern_bad");
  const std::string path = dir + "/bad.json";
  write_file(path, R"({"name": "b", "flavour": "llama", "layers": 4, "hidden": 64, "heads": 4, "ffn": 128,
                       "vocab": 256, "max_seq": 64, "attention_pattern": ["full", "local"]})");
  auto r = run_cli({"kv", "--model", path, "--context", "16"});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "field 'attention_pattern[1]'")) << r.err;
}

// gemma-3-27b's first six layers: five local, one global.
TEST(CliHybridModels, InferRefusesLayersOfDifferentWindows) {
  auto r = run_cli({"infer", "--model", "gemma-3-27b", "--layers", "6", "--device-memory", "1Ti", "--requests", "1",
                    "--prompt-len", "8", "--gen-len", "2", "--backend", "meta"});
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_TRUE(contains(r.err, "attention_pattern")) << r.err;
}

// The engine's cached attention has no sink term: a model with sinks is refused by name.
TEST(CliHybridModels, InferRefusesAttentionSinks) {
  auto r = run_cli({"infer", "--model", "gpt-oss-20b", "--layers", "2", "--device-memory", "1Ti", "--requests", "1",
                    "--prompt-len", "8", "--gen-len", "2", "--backend", "meta"});
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_TRUE(contains(r.err, "attention_sinks")) << r.err;
}

}  // namespace
