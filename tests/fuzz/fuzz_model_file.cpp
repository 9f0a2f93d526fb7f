// libFuzzer target: model files (core/model_config.cpp parse_model_config).
// Any input either parses into a config that passes validation and the limits
// of core/limits.h, or throws ConfigError; nothing else may escape, and no
// sanitizer may report.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/limits.h"
#include "core/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const gpuledger::ModelConfig m = gpuledger::parse_model_config(text, "fuzz");
    // What parsed must be within the stated limits.
    if (m.layers < 1 || m.layers > gpuledger::limits::kMaxLayers || m.hidden > gpuledger::limits::kMaxHidden ||
        m.vocab > gpuledger::limits::kMaxVocab || m.max_seq > gpuledger::limits::kMaxTokens)
      std::abort();
  } catch (const gpuledger::ConfigError&) {
  }
  return 0;
}
