// Per-layer attention windows (see attention_pattern.h): the pattern read from
// a model file, checked, looked up per layer and written back.
//
// The form follows the published configs of hybrid models: Gemma 3
// (transformers' Gemma3TextConfig: layer i slides unless (i + 1) is a multiple
// of sliding_window_pattern = 6, so a repeating list of five "sliding" and one
// "full") and gpt-oss (its config.json's layer_types alternates
// "sliding_attention" and "full_attention"). A list as long as the model is an
// explicit per-layer list; a shorter one repeats, the last repetition cut at
// the layer count (Gemma 3's 62 layers are ten repetitions of six and two more).
#include "core/attention_pattern.h"

#include <nlohmann/json.hpp>

#include "core/limits.h"

namespace gpuledger {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& field, const std::string& origin, const std::string& what) {
  throw ConfigError(field, origin + ": field '" + field + "': " + what);
}

std::string entry_field(size_t i) { return "attention_pattern[" + std::to_string(i) + "]"; }

}  // namespace

std::optional<int64_t> layer_window(const ModelConfig& m, int64_t layer) {
  if (m.attention_pattern.empty()) return m.sliding_window;
  const auto n = static_cast<int64_t>(m.attention_pattern.size());
  return m.attention_pattern[static_cast<size_t>(layer % n)];
}

bool uniform_attention(const ModelConfig& m) {
  const auto first = layer_window(m, 0);
  for (int64_t i = 1; i < m.layers; ++i)
    if (layer_window(m, i) != first) return false;
  return true;
}

bool any_sliding(const ModelConfig& m) {
  if (m.attention_pattern.empty()) return m.sliding_window.has_value();
  for (const auto& w : m.attention_pattern)
    if (w) return true;
  return false;
}

std::vector<std::optional<int64_t>> layer_windows(const ModelConfig& m, int64_t first, int64_t count) {
  std::vector<std::optional<int64_t>> w;
  w.reserve(static_cast<size_t>(count));
  for (int64_t i = first; i < first + count; ++i) w.push_back(layer_window(m, i));
  return w;
}

std::vector<std::optional<int64_t>> parse_attention_pattern(const json& v, std::optional<int64_t> sliding_window,
                                                            const std::string& origin) {
  if (!v.is_array() || v.empty())
    fail("attention_pattern", origin,
         "expected a non-empty array of \"full\", \"sliding\" or a window in tokens, one entry per layer (repeating)");
  std::vector<std::optional<int64_t>> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const json& e = v[i];
    if (e.is_string() && e.get<std::string>() == "full") {
      out.emplace_back(std::nullopt);
    } else if (e.is_string() && e.get<std::string>() == "sliding") {
      if (!sliding_window)
        fail(entry_field(i), origin, "\"sliding\" needs the model's sliding_window (a window in tokens)");
      out.emplace_back(*sliding_window);
    } else if (e.is_number_integer()) {
      if (e.is_number_unsigned() && e.get<uint64_t>() > static_cast<uint64_t>(limits::kMaxTokens))
        fail(entry_field(i), origin, "window is above the limit " + std::to_string(limits::kMaxTokens));
      out.emplace_back(e.get<int64_t>());
    } else {
      fail(entry_field(i), origin, "expected \"full\", \"sliding\" or a window in tokens, got " + e.dump());
    }
  }
  return out;
}

void validate_attention_pattern(const ModelConfig& m, const std::string& origin) {
  const auto& p = m.attention_pattern;
  if (p.empty()) return;
  if (static_cast<int64_t>(p.size()) > m.layers)
    fail("attention_pattern", origin,
         "has " + std::to_string(p.size()) + " entries for " + std::to_string(m.layers) +
             " layers (a list repeats over the layers: at most one entry per layer)");
  bool uses_sliding_window = false;
  for (size_t i = 0; i < p.size(); ++i) {
    if (!p[i]) continue;
    if (*p[i] < 1 || *p[i] > limits::kMaxTokens)
      fail(entry_field(i), origin,
           "window must be in [1, " + std::to_string(limits::kMaxTokens) + "], got " + std::to_string(*p[i]));
    if (m.is_gpt()) fail(entry_field(i), origin, "gpt has no sliding-window attention");
    uses_sliding_window = uses_sliding_window || p[i] == m.sliding_window;
  }
  if (m.sliding_window && !uses_sliding_window)
    fail("sliding_window", origin,
         "given beside attention_pattern, but no entry is \"sliding\": the window would be unused");
}

json attention_pattern_json(const ModelConfig& m) {
  json a = json::array();
  for (const auto& w : m.attention_pattern) {
    if (!w)
      a.push_back("full");
    else if (w == m.sliding_window)
      a.push_back("sliding");
    else
      a.push_back(*w);
  }
  return a;
}

}  // namespace gpuledger
