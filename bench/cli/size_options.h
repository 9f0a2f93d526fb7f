// Sizes typed on the command line: "80G", "80Gi", "1.5T", "4096" as bytes
// (--device-memory, --memory-limit, --overhead, --train-tokens, …).
#pragma once
#include <cstdint>
#include <string>

namespace gpuledger::cli {

// "80G" = 80e9, "80Gi" = 80·2^30, "1.5T", "4096"; K/M/G/T decimal, Ki/Mi/Gi/Ti binary.
// Throws std::invalid_argument naming the text.
int64_t parse_size(const std::string& text);
// parse_size for the option `option` (without dashes): ConfigError naming it.
int64_t parse_size_option(const std::string& option, const std::string& text);

}  // namespace gpuledger::cli
