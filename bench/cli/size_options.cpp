// Sizes typed on the command line (see size_options.h).
#include "bench/cli/size_options.h"

#include <cmath>
#include <stdexcept>

#include "core/model_config.h"

namespace gpuledger::cli {

int64_t parse_size(const std::string& text) {
  size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(text, &pos);
  } catch (const std::exception&) {
    throw std::invalid_argument("not a size: '" + text + "' (use e.g. 80G, 80Gi, 4096)");
  }
  const std::string suffix = text.substr(pos);
  double mult = 1;
  if (suffix.empty() || suffix == "B")
    mult = 1;
  else if (suffix == "K" || suffix == "KB")
    mult = 1e3;
  else if (suffix == "M" || suffix == "MB")
    mult = 1e6;
  else if (suffix == "G" || suffix == "GB")
    mult = 1e9;
  else if (suffix == "T" || suffix == "TB")
    mult = 1e12;
  else if (suffix == "Ki" || suffix == "KiB")
    mult = 1024.0;
  else if (suffix == "Mi" || suffix == "MiB")
    mult = 1024.0 * 1024;
  else if (suffix == "Gi" || suffix == "GiB")
    mult = 1024.0 * 1024 * 1024;
  else if (suffix == "Ti" || suffix == "TiB")
    mult = 1024.0 * 1024 * 1024 * 1024;
  else
    throw std::invalid_argument("unknown size suffix in '" + text + "' (K M G T, Ki Mi Gi Ti)");
  const double bytes = value * mult;
  if (!(bytes >= 0) || bytes > 9.2e18 || std::floor(bytes) != bytes)
    throw std::invalid_argument("not a whole, non-negative number of bytes: '" + text + "'");
  return static_cast<int64_t>(bytes);
}

int64_t parse_size_option(const std::string& option, const std::string& text) {
  try {
    return parse_size(text);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(option, "--" + option + ": " + e.what());
  }
}

}  // namespace gpuledger::cli
