// Per-layer attention (docs/architecture.md "Attention per layer"): each layer
// attends either to every earlier token (full) or to the last `window` tokens
// (sliding). A model file gives the pattern as `attention_pattern`, a list of
// "full", "sliding" (the model's `sliding_window`) or a window in tokens, that
// repeats over the layers; `sliding_window` alone means every layer slides.
// ModelConfig::attention_pattern holds the list resolved to windows (none:
// full); this header is the one place a layer's window is read from.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/model_config.h"

namespace gpuledger {

// The window of global layer `layer` (0-based): the pattern's entry
// layer mod P when a pattern is given, else `sliding_window` (none: full).
std::optional<int64_t> layer_window(const ModelConfig& m, int64_t layer);

// Whether every layer has the same window (or every layer is full): the
// model then has one attention kind, as Mistral (all sliding) or Llama (all full).
bool uniform_attention(const ModelConfig& m);

// Whether any layer has a window.
bool any_sliding(const ModelConfig& m);

// The windows of layers [first, first + count), in order.
std::vector<std::optional<int64_t>> layer_windows(const ModelConfig& m, int64_t first, int64_t count);

// Reads a model file's `attention_pattern` (a non-empty array) into windows;
// "sliding" takes `sliding_window`. Throws ConfigError naming
// attention_pattern[i] for an entry that is not "full", "sliding" or an
// integer, and "sliding" without a sliding_window.
std::vector<std::optional<int64_t>> parse_attention_pattern(const nlohmann::json& v,
                                                            std::optional<int64_t> sliding_window,
                                                            const std::string& origin);

// Checks of a resolved pattern against the rest of the config (called by the
// model file's validation): at most `layers` entries; each window in
// [1, limits::kMaxTokens]; a gpt model has none; a `sliding_window` given
// beside a pattern is used by one of its entries.
void validate_attention_pattern(const ModelConfig& m, const std::string& origin);

// The pattern as a model file writes it: "full", "sliding" (an entry equal to
// sliding_window) or the window; so a report's model reads back as the same config.
nlohmann::json attention_pattern_json(const ModelConfig& m);

}  // namespace gpuledger
