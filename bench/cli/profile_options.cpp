// --device-profile and --network-profile (see profile_options.h).
#include "bench/cli/profile_options.h"

#include <stdexcept>

#include "bench/run/predict_step.h"
#include "core/model_config.h"

namespace gpuledger::cli {

void add_profile_options(CLI::App& app, ProfileOptions& o, const std::string& group) {
  app.add_option("--device-profile", o.device_profile,
                 "predict the step on this device profile: a published name (a100-80gb, h100-sxm, h200, b200) or a "
                 "file from `gpuledger calibrate` (default: the --device preset's published profile)")
      ->group(group);
  app.add_option("--network-profile", o.network_profile,
                 "the network profile of the prediction: a published name or a calibrate file (default: the "
                 "published one named like the device profile)")
      ->group(group);
}

std::optional<run::PerfProfiles> resolve_profile_options(const ProfileOptions& o, const ResolvedConfig& c,
                                                         bool from_device) {
  if (!from_device && !o.any()) return std::nullopt;
  try {
    return run::resolve_perf_profiles(o.device_profile, o.network_profile, c.device, c.layout.world());
  } catch (const std::invalid_argument& e) {
    throw ConfigError(o.device_profile.empty() ? "network-profile" : "device-profile", e.what());
  }  // a file that cannot be read is a ConfigError already
}

}  // namespace gpuledger::cli
