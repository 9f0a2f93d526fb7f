// Model files: every preset loads, validates and reproduces its model's
// published parameter count; every error path of parse_model_config /
// load_model / with_layers names its field and origin.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/model_config.h"

namespace gpuledger {
namespace {

namespace fs = std::filesystem;

// Calls f, expects a ConfigError, returns it.
template <class F>
ConfigError expect_error(F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "no ConfigError thrown";
  return ConfigError("<none>", "<none>");
}

bool contains(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }

// A valid llama file, with `extra` spliced in before the closing brace
// (a later duplicate key overrides the earlier one in nlohmann/json).
std::string llama_json(const std::string& extra = "") {
  return R"({"name": "t", "flavour": "llama", "layers": 2, "hidden": 64, "heads": 4,
             "kv_heads": 2, "ffn": 176, "vocab": 97, "max_seq": 64)" +
         (extra.empty() ? std::string() : ", " + extra) + "}";
}

std::string gpt_json(const std::string& extra = "") {
  return R"({"name": "g", "flavour": "gpt", "layers": 2, "hidden": 64, "heads": 4,
             "vocab": 97, "max_seq": 64)" +
         (extra.empty() ? std::string() : ", " + extra) + "}";
}

// ---- presets ----

const std::vector<std::string> kPresets = {"gpt2",       "gpt2-large",    "gpt2-medium", "gpt2-xl",     "llama2-13b",
                                           "llama2-70b", "llama2-7b",     "llama3-70b",  "llama3-8b",   "llama3.1-405b",
                                           "mistral-7b", "mixtral-8x7b",  "qwen2.5-14b", "qwen2.5-32b", "qwen2.5-72b",
                                           "qwen2.5-7b", "qwen3-30b-a3b", "small-gpt",   "small-llama", "tiny-gpt",
                                           "tiny-llama", "tiny-mla",      "tiny-moe"};

TEST(Presets, NamesAreSortedAndComplete) {
  const auto names = preset_names();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  for (const auto& p : kPresets) EXPECT_NE(std::find(names.begin(), names.end(), p), names.end()) << p;
}

TEST(Presets, EveryPresetLoadsValidatesAndCarriesItsName) {
  for (const auto& name : preset_names()) {
    SCOPED_TRACE(name);
    const ModelConfig m = load_model(name);
    EXPECT_EQ(m.name, name);         // file stem == "name"
    EXPECT_FALSE(m.source.empty());  // every preset says where its values come from
    EXPECT_NO_THROW(validate_model_config(m));
    EXPECT_EQ(m.heads % m.kv_heads, 0);
  }
}

// Ψ written out here, independently of analytic/params.cpp:
// gpt: L·(12h² + 13h) + Vh + max_seq·h + 2h (GPT-2: LN γβ ×2, QKV, proj, MLP, all biased);
// llama: L·(2h + h(a+2k)d [+ (a+2k)d] + a·d·h + 3hf) + Vh·(tied ? 1 : 2) + h.
int64_t test_params(const ModelConfig& m) {
  const int64_t h = m.hidden, qkv = m.q_dim() + 2 * m.kv_dim(), f = m.ffn;
  if (m.is_gpt()) {
    const int64_t layer = 2 * h + h * qkv + qkv + m.q_dim() * h + h + 2 * h + h * f + f + f * h + h;
    return m.layers * layer + m.vocab * h + m.max_seq * h + 2 * h;
  }
  const int64_t layer = 2 * h + h * qkv + (m.qkv_bias ? qkv : 0) + m.q_dim() * h + 3 * h * f;
  return m.layers * layer + m.vocab * h * (m.tied_embeddings ? 1 : 2) + h;
}

// Published totals (HF model cards / safetensors metadata; GPT-2 tied).
TEST(Presets, ReproducePublishedParameterCounts) {
  const std::map<std::string, int64_t> published = {{"gpt2", 124'439'808},           {"gpt2-medium", 354'823'168},
                                                    {"gpt2-large", 774'030'080},     {"gpt2-xl", 1'557'611'200},
                                                    {"llama2-7b", 6'738'415'616},    {"llama2-13b", 13'015'864'320},
                                                    {"llama2-70b", 68'976'648'192},  {"llama3-8b", 8'030'261'248},
                                                    {"llama3-70b", 70'553'706'496},  {"llama3.1-405b", 405'853'388'800},
                                                    {"mistral-7b", 7'241'732'096},   {"qwen2.5-7b", 7'615'616'512},
                                                    {"qwen2.5-14b", 14'770'033'664}, {"qwen2.5-32b", 32'763'876'352},
                                                    {"qwen2.5-72b", 72'706'203'648}};
  for (const auto& [name, psi] : published) EXPECT_EQ(test_params(load_model(name)), psi) << name;
}

TEST(Presets, SpotValues) {
  const ModelConfig l3 = load_model("llama3-8b");
  EXPECT_EQ(l3.flavour, Flavour::kLlama);
  EXPECT_EQ(l3.layers, 32);
  EXPECT_EQ(l3.kv_heads, 8);
  EXPECT_EQ(l3.head_dim, 128);
  EXPECT_EQ(l3.kv_dim(), 1024);
  EXPECT_FALSE(l3.tied_embeddings);
  EXPECT_FALSE(l3.sliding_window.has_value());

  const ModelConfig mi = load_model("mistral-7b");
  ASSERT_TRUE(mi.sliding_window.has_value());
  EXPECT_EQ(*mi.sliding_window, 4096);

  const ModelConfig q = load_model("qwen2.5-7b");
  EXPECT_TRUE(q.qkv_bias);
  EXPECT_FALSE(q.tied_embeddings);

  const ModelConfig g = load_model("gpt2");
  EXPECT_TRUE(g.is_gpt());
  EXPECT_TRUE(g.tied_embeddings);
  EXPECT_TRUE(g.qkv_bias);
  EXPECT_EQ(g.ffn, 3072);

  const ModelConfig tg = load_model("tiny-gpt");
  EXPECT_EQ(tg.vocab, 97);
  const ModelConfig tl = load_model("tiny-llama");
  EXPECT_EQ(tl.kv_heads, 2);
  EXPECT_EQ(tl.head_dim, 16);
}

TEST(Presets, UnknownPresetListsKnownNames) {
  const ConfigError e = expect_error([] { load_model("llama9-1t"); });
  const std::string msg = e.what();
  EXPECT_TRUE(contains(msg, "llama9-1t")) << msg;
  EXPECT_TRUE(contains(msg, "llama3-8b")) << msg;
  EXPECT_TRUE(contains(msg, "gpt2-xl")) << msg;
  EXPECT_TRUE(contains(msg, "tiny-llama")) << msg;
}

TEST(Presets, LoadByPathAndMissingPath) {
  const fs::path dir = fs::temp_directory_path() / "gpl_test_config";
  fs::create_directories(dir);
  const fs::path file = dir / "mine.json";
  std::ofstream(file) << llama_json();
  const ModelConfig m = load_model(file.string());
  EXPECT_EQ(m.name, "t");
  EXPECT_EQ(m.ffn, 176);

  std::ofstream(dir / "bad.json") << llama_json(R"("layerz": 3)");
  const ConfigError bad = expect_error([&] { load_model((dir / "bad.json").string()); });
  EXPECT_EQ(bad.field(), "layerz");
  EXPECT_TRUE(contains(bad.what(), (dir / "bad.json").string())) << bad.what();  // origin = path

  const ConfigError missing = expect_error([&] { load_model((dir / "nope.json").string()); });
  EXPECT_TRUE(contains(missing.what(), "nope.json")) << missing.what();
  fs::remove_all(dir);
}

TEST(Presets, EnvironmentOverridesPresetDir) {
  const fs::path dir = fs::temp_directory_path() / "gpl_test_presets";
  fs::create_directories(dir);
  std::ofstream(dir / "only-one.json") << llama_json();
  ASSERT_EQ(setenv("GPULEDGER_PRESETS", dir.c_str(), 1), 0);
  EXPECT_EQ(preset_dir(), dir.string());
  EXPECT_EQ(preset_names(), std::vector<std::string>{"only-one"});
  EXPECT_EQ(load_model("only-one").name, "t");
  unsetenv("GPULEDGER_PRESETS");
  fs::remove_all(dir);
}

// ---- defaults ----

TEST(Parse, GptDefaults) {
  const ModelConfig m = parse_model_config(gpt_json(), "x.json");
  EXPECT_EQ(m.kv_heads, 4);
  EXPECT_EQ(m.head_dim, 16);
  EXPECT_EQ(m.ffn, 256);  // 4h
  EXPECT_TRUE(m.tied_embeddings);
  EXPECT_TRUE(m.qkv_bias);
  EXPECT_TRUE(m.source.empty());
}

TEST(Parse, LlamaDefaults) {
  const ModelConfig m = parse_model_config(
      R"({"name": "t", "flavour": "llama", "layers": 2, "hidden": 64, "heads": 4,
          "ffn": 176, "vocab": 97, "max_seq": 64, "sliding_window": null})",
      "x.json");
  EXPECT_EQ(m.kv_heads, 4);
  EXPECT_EQ(m.head_dim, 16);
  EXPECT_FALSE(m.tied_embeddings);
  EXPECT_FALSE(m.qkv_bias);
  EXPECT_FALSE(m.sliding_window.has_value());
}

TEST(Parse, ExplicitHeadDimMayDifferFromHiddenOverHeads) {
  // Llama-family models may set head_dim independently (e.g. 3 heads × 32 ≠ 64).
  const ModelConfig m = parse_model_config(llama_json(R"("heads": 6, "kv_heads": 3, "head_dim": 32)"), "x.json");
  EXPECT_EQ(m.q_dim(), 192);
  EXPECT_EQ(m.kv_dim(), 96);
}

// ---- error paths ----

TEST(ParseErrors, UnknownField) {
  const ConfigError e = expect_error([] { parse_model_config(llama_json(R"("rope": 1)"), "my.json"); });
  EXPECT_EQ(e.field(), "rope");
  EXPECT_TRUE(contains(e.what(), "rope")) << e.what();
  EXPECT_TRUE(contains(e.what(), "my.json")) << e.what();
  EXPECT_TRUE(contains(e.what(), "unknown")) << e.what();
}

TEST(ParseErrors, WrongTypes) {
  struct Case {
    std::string extra, field;
  } cases[] = {{R"("layers": "32")", "layers"},
               {R"("hidden": 64.0)", "hidden"},
               {R"("heads": [4])", "heads"},
               {R"("vocab": null)", "vocab"},
               {R"("tied_embeddings": 1)", "tied_embeddings"},
               {R"("qkv_bias": "yes")", "qkv_bias"},
               {R"("sliding_window": "4k")", "sliding_window"},
               {R"("sliding_window": 40.5)", "sliding_window"},
               {R"("name": 7)", "name"},
               {R"("source": false)", "source"},
               {R"("flavour": "mamba")", "flavour"},
               {R"("layers": 18446744073709551615)", "layers"}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.extra);
    const ConfigError e = expect_error([&] { parse_model_config(llama_json(c.extra), "o.json"); });
    EXPECT_EQ(e.field(), c.field);
    EXPECT_TRUE(contains(e.what(), "'" + c.field + "'")) << e.what();
    EXPECT_TRUE(contains(e.what(), "o.json")) << e.what();
  }
}

TEST(ParseErrors, NonPositiveSizes) {
  for (const char* field : {"layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab", "max_seq"}) {
    for (int v : {0, -3}) {
      SCOPED_TRACE(std::string(field) + "=" + std::to_string(v));
      std::string extra = "\"";
      extra.append(field).append("\": ").append(std::to_string(v));
      const ConfigError e = expect_error([&] { parse_model_config(llama_json(extra), "o.json"); });
      EXPECT_EQ(e.field(), field);
      EXPECT_TRUE(contains(e.what(), field)) << e.what();
    }
  }
  const ConfigError sw = expect_error([] { parse_model_config(llama_json(R"("sliding_window": 0)"), "o.json"); });
  EXPECT_EQ(sw.field(), "sliding_window");
}

TEST(ParseErrors, HeadsNotMultipleOfKvHeads) {
  const ConfigError e = expect_error([] { parse_model_config(llama_json(R"("kv_heads": 3)"), "o.json"); });
  EXPECT_EQ(e.field(), "kv_heads");
  EXPECT_TRUE(contains(e.what(), "kv_heads 3")) << e.what();
  EXPECT_TRUE(contains(e.what(), "heads 4")) << e.what();
}

TEST(ParseErrors, MissingRequiredFields) {
  const ConfigError v = expect_error([] {
    parse_model_config(R"({"name": "t", "flavour": "llama", "layers": 2, "hidden": 64,
                           "heads": 4, "ffn": 176, "max_seq": 64})",
                       "o.json");
  });
  EXPECT_EQ(v.field(), "vocab");
  // llama's ffn has no default
  const ConfigError f = expect_error([] {
    parse_model_config(R"({"name": "t", "flavour": "llama", "layers": 2, "hidden": 64,
                           "heads": 4, "vocab": 97, "max_seq": 64})",
                       "o.json");
  });
  EXPECT_EQ(f.field(), "ffn");
}

TEST(ParseErrors, HeadDimUndeterminable) {
  // 100 % 3 != 0 and no head_dim given.
  const ConfigError e =
      expect_error([] { parse_model_config(llama_json(R"("hidden": 100, "heads": 3, "kv_heads": 3)"), "o.json"); });
  EXPECT_EQ(e.field(), "head_dim");
}

TEST(ParseErrors, GptConstraints) {
  EXPECT_EQ(expect_error([] { parse_model_config(gpt_json(R"("qkv_bias": false)"), "o"); }).field(), "qkv_bias");
  EXPECT_EQ(expect_error([] { parse_model_config(gpt_json(R"("kv_heads": 2)"), "o"); }).field(), "kv_heads");
  EXPECT_EQ(expect_error([] { parse_model_config(gpt_json(R"("head_dim": 8)"), "o"); }).field(), "head_dim");
  EXPECT_EQ(expect_error([] { parse_model_config(gpt_json(R"("sliding_window": 32)"), "o"); }).field(),
            "sliding_window");
}

TEST(ParseErrors, MalformedJsonGivesLineAndColumn) {
  // Line 3 is `  "layers": 2,,`: the second comma is column 15.
  const std::string text = "{\n  \"name\": \"t\",\n  \"layers\": 2,,\n}";
  const ConfigError e = expect_error([&] { parse_model_config(text, "broken.json"); });
  const std::string msg = e.what();
  EXPECT_TRUE(contains(msg, "broken.json:3:15")) << msg;
  EXPECT_TRUE(contains(msg, "line 3, column 15")) << msg;
  EXPECT_EQ(e.field(), "");

  // An unterminated string opened on line 2, column 11, runs to the end of input (line 2).
  const std::string text2 = "{\"a\": 1,\n  \"b\": \"xyz";
  const std::string msg2 = expect_error([&] { parse_model_config(text2, "b2.json"); }).what();
  EXPECT_TRUE(contains(msg2, "b2.json:2:")) << msg2;
}

TEST(ParseErrors, TopLevelMustBeObject) {
  const ConfigError e = expect_error([] { parse_model_config("[1, 2]", "arr.json"); });
  EXPECT_TRUE(contains(e.what(), "arr.json")) << e.what();
  EXPECT_TRUE(contains(e.what(), "object")) << e.what();
}

TEST(Validate, NamesTheFieldAndTheModel) {
  ModelConfig m = load_model("llama3-8b");
  m.kv_heads = 5;
  const ConfigError e = expect_error([&] { validate_model_config(m); });
  EXPECT_EQ(e.field(), "kv_heads");
  EXPECT_TRUE(contains(e.what(), "llama3-8b")) << e.what();
  m = load_model("llama3-8b");
  m.ffn = 0;
  EXPECT_EQ(expect_error([&] { validate_model_config(m); }).field(), "ffn");
}

// ---- --layers ----

TEST(WithLayers, KeepsTheLayerShape) {
  const ModelConfig full = load_model("llama2-7b");
  const ModelConfig two = with_layers(full, 2);
  EXPECT_EQ(two.layers, 2);
  EXPECT_EQ(two.name, full.name);
  EXPECT_EQ(two.hidden, full.hidden);
  EXPECT_EQ(two.heads, full.heads);
  EXPECT_EQ(two.kv_heads, full.kv_heads);
  EXPECT_EQ(two.ffn, full.ffn);
  EXPECT_EQ(two.vocab, full.vocab);
  // Ψ drops by exactly 30 layers of 202,383,360 (4h² attention + 3·h·11008 MLP + 2h norms).
  EXPECT_EQ(test_params(full) - test_params(two), 30LL * 202'383'360);
}

TEST(WithLayers, RejectsNonPositive) {
  const ModelConfig m = load_model("tiny-gpt");
  for (int64_t n : {0, -1}) {
    const ConfigError e = expect_error([&] { with_layers(m, n); });
    EXPECT_EQ(e.field(), "layers");
    EXPECT_TRUE(contains(e.what(), "tiny-gpt")) << e.what();
  }
}

}  // namespace
}  // namespace gpuledger
