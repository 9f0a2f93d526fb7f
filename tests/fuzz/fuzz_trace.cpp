// libFuzzer target: request traces (models/transformer/request_trace.cpp
// parse_trace). Any input either parses into requests within the limits of
// core/limits.h or throws std::invalid_argument naming the line.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "core/limits.h"
#include "models/transformer/request_trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto shapes = gpuledger::parse_trace(text, "fuzz.jsonl");
    if (shapes.empty() || static_cast<int64_t>(shapes.size()) > gpuledger::limits::kMaxTraceRequests) std::abort();
    for (const auto& s : shapes)
      if (s.prompt_len < 1 || s.gen_len < 1 || s.arrival < 0 || s.prompt_len > gpuledger::limits::kMaxTokens ||
          s.gen_len > gpuledger::limits::kMaxTokens)
        std::abort();
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
