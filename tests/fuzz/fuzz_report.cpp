// libFuzzer target: reports as check and regress read them
// (bench/report/report.cpp parse_report). Any input either parses or throws
// ConfigError naming the origin; nothing else may escape.
#include <cstddef>
#include <cstdint>
#include <string>

#include "bench/report/report.h"
#include "core/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    (void)gpuledger::report::parse_report(text, "fuzz.json");
  } catch (const gpuledger::ConfigError&) {
  }
  return 0;
}
