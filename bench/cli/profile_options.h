// --device-profile and --network-profile: the profiles a predicted step is
// priced on (docs/perf-model.md "Predicting a step"), shared by train, plan
// and sweep.
#pragma once
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "bench/record/step_prediction.h"
#include "core/resolved_config.h"

namespace gpuledger::cli {

struct ProfileOptions {
  std::string device_profile, network_profile;
  bool any() const { return !device_profile.empty() || !network_profile.empty(); }
};

void add_profile_options(CLI::App& app, ProfileOptions& o, const std::string& group);

// The profiles named, or with `from_device` and none named, the published
// profiles of the --device preset (none when it has none). A name neither
// published nor a file, a file that is not a profile, or a layout of several
// ranks without a network profile: ConfigError naming the option (exit 2).
std::optional<run::PerfProfiles> resolve_profile_options(const ProfileOptions& o, const ResolvedConfig& c,
                                                         bool from_device);

}  // namespace gpuledger::cli
