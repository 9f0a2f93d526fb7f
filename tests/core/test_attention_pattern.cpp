// Per-layer attention windows (core/attention_pattern.h): the model file's
// attention_pattern read, repeated over the layers, checked with errors that
// name the field, cut by --layers, and written back so a report's model reads
// as the same config; an old file's sliding_window alone still means every layer.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/attention_pattern.h"
#include "core/model_config.h"

namespace gpuledger {
namespace {

using W = std::optional<int64_t>;

std::string llama_json(int64_t layers, const std::string& extra) {
  return R"({"name": "t", "flavour": "llama", "layers": )" + std::to_string(layers) +
         R"(, "hidden": 64, "heads": 4, "kv_heads": 2, "ffn": 176, "vocab": 97, "max_seq": 64, )" + extra + "}";
}

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

TEST(AttentionPattern, SlidingWindowAloneIsEveryLayer) {
  const auto m = parse_model_config(llama_json(3, R"("sliding_window": 16)"), "f");
  EXPECT_TRUE(m.attention_pattern.empty());
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(layer_window(m, i), W(16)) << i;
  EXPECT_TRUE(uniform_attention(m));
  EXPECT_TRUE(any_sliding(m));
  const auto full = parse_model_config(llama_json(3, R"("sliding_window": null)"), "f");
  EXPECT_EQ(layer_window(full, 2), std::nullopt);
  EXPECT_TRUE(uniform_attention(full));
  EXPECT_FALSE(any_sliding(full));
}

// Gemma 3's rule, written out: layer i slides unless (i + 1) % 6 == 0 (62 layers: 10 global).
TEST(AttentionPattern, RepeatsOverTheLayersAsGemma3) {
  const auto m = parse_model_config(
      llama_json(62, R"("sliding_window": 1024, "attention_pattern": ["sliding", "sliding", "sliding", "sliding",
                                                                      "sliding", "full"])"),
      "f");
  int64_t global = 0;
  for (int64_t i = 0; i < 62; ++i) {
    const W expected = (i + 1) % 6 == 0 ? W() : W(1024);
    EXPECT_EQ(layer_window(m, i), expected) << i;
    global += expected ? 0 : 1;
  }
  EXPECT_EQ(global, 10);
  EXPECT_FALSE(uniform_attention(m));
  EXPECT_EQ(layer_windows(m, 58, 4), (std::vector<W>{W(1024), W(), W(1024), W(1024)}));
}

TEST(AttentionPattern, ExplicitListWithItsOwnWindows) {
  const auto m = parse_model_config(llama_json(4, R"("attention_pattern": [8, "full", 32, "full"])"), "f");
  EXPECT_EQ(m.attention_pattern, (std::vector<W>{W(8), W(), W(32), W()}));
  EXPECT_EQ(layer_window(m, 2), W(32));
  // An all-"full" list is a full-attention model.
  const auto f = parse_model_config(llama_json(2, R"("attention_pattern": ["full"])"), "f");
  EXPECT_FALSE(any_sliding(f));
}

TEST(AttentionPattern, ErrorsNameTheField) {
  struct Case {
    std::string extra, field, says;
  };
  const std::vector<Case> cases = {
      {R"("attention_pattern": [])", "attention_pattern", "non-empty array"},
      {R"("attention_pattern": "sliding")", "attention_pattern", "non-empty array"},
      {R"("attention_pattern": ["full", "global"])", "attention_pattern[1]", R"(got "global")"},
      {R"("attention_pattern": ["full", 2.5])", "attention_pattern[1]", "got 2.5"},
      {R"("attention_pattern": ["sliding", "full"])", "attention_pattern[0]", "needs the model's sliding_window"},
      {R"("attention_pattern": [0, "full"])", "attention_pattern[0]", "window must be in [1, "},
      {R"("attention_pattern": [-4])", "attention_pattern[0]", "window must be in [1, "},
      {R"("attention_pattern": [99999999999])", "attention_pattern[0]", "above the limit"},
      {R"("attention_pattern": [8, "full", 8, "full", "full"])", "attention_pattern", "5 entries for 4 layers"},
      {R"("sliding_window": 8, "attention_pattern": [4, "full"])", "sliding_window", "no entry is \"sliding\""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.extra);
    const auto e = expect_error([&] { parse_model_config(llama_json(4, c.extra), "file.json"); });
    EXPECT_EQ(e.field(), c.field);
    EXPECT_TRUE(contains(e.what(), "file.json: field '" + c.field + "'")) << e.what();
    EXPECT_TRUE(contains(e.what(), c.says)) << e.what();
  }
  const auto gpt = expect_error([] {
    parse_model_config(R"({"name": "g", "flavour": "gpt", "layers": 2, "hidden": 64, "heads": 4, "vocab": 97,
                           "max_seq": 64, "attention_pattern": [8, "full"]})",
                       "g.json");
  });
  EXPECT_EQ(gpt.field(), "attention_pattern[0]");
  EXPECT_TRUE(contains(gpt.what(), "gpt has no sliding-window attention")) << gpt.what();
}

// --layers N keeps the first N layers' windows; a sliding_window no kept layer
// uses is dropped (so the config stays valid and reads back the same).
TEST(AttentionPattern, WithLayersCutsThePattern) {
  const auto m =
      parse_model_config(llama_json(4, R"("sliding_window": 8, "attention_pattern": ["full", "sliding"])"), "f");
  const auto two = with_layers(m, 2);
  EXPECT_EQ(two.attention_pattern, (std::vector<W>{W(), W(8)}));
  const auto one = with_layers(m, 1);
  EXPECT_EQ(one.attention_pattern, (std::vector<W>{W()}));
  EXPECT_EQ(one.sliding_window, std::nullopt);
  EXPECT_FALSE(any_sliding(one));
  const auto six = with_layers(m, 6);  // longer: the pattern repeats
  EXPECT_EQ(layer_window(six, 5), W(8));
}

// The report writes the pattern as a file writes it; parsing that gives the same windows.
TEST(AttentionPattern, WrittenBackReadsTheSame) {
  const auto m =
      parse_model_config(llama_json(4, R"("sliding_window": 8, "attention_pattern": ["sliding", 16, "full"])"), "f");
  const nlohmann::json j = attention_pattern_json(m);
  EXPECT_EQ(j, nlohmann::json::parse(R"(["sliding", 16, "full"])"));
  const auto back = parse_model_config(llama_json(4, R"("sliding_window": 8, "attention_pattern": )" + j.dump()), "r");
  EXPECT_EQ(back.attention_pattern, m.attention_pattern);
}

TEST(AttentionPattern, PresetsOfHybridModels) {
  const auto gemma = load_model("gemma-3-27b");
  EXPECT_EQ(layer_window(gemma, 0), W(1024));
  EXPECT_EQ(layer_window(gemma, 5), W());
  EXPECT_EQ(layer_window(gemma, 61), W(1024));
  for (const char* name : {"gpt-oss-120b", "gpt-oss-20b"}) {
    const auto m = load_model(name);
    EXPECT_EQ(layer_window(m, 0), W(128)) << name;  // transformers' layer_types: layer 0 slides
    EXPECT_EQ(layer_window(m, 1), W()) << name;
    EXPECT_EQ(layer_window(m, m.layers - 1), W()) << name;
  }
}

}  // namespace
}  // namespace gpuledger
