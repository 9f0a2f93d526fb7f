// Range checks against the stated limits (see limits.h).
#include "core/limits.h"

#include <string>

#include "core/model_config.h"

namespace gpuledger::limits {

void check_range(std::string_view field, int64_t value, int64_t min, int64_t max) {
  const std::string f(field);
  if (value < min) throw ConfigError(f, f + " must be >= " + std::to_string(min) + ", got " + std::to_string(value));
  if (value > max) throw ConfigError(f, f + " " + std::to_string(value) + " is above the limit " + std::to_string(max));
}

}  // namespace gpuledger::limits
