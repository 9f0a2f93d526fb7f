// The published device and network profiles (perf/profiles/<name>.device.json
// and <name>.network.json): a100-80gb, h100-sxm, h200, b200, each figure with
// its source and provenance "published, not measured here". They are compiled
// into the library (perf/CMakeLists.txt embeds the files), so a binary needs
// no data folder to find them, installed or not.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "perf/device_profile.h"
#include "perf/network_profile.h"

namespace gpuledger::perf {

// The names that have both a device and a network profile, sorted.
std::vector<std::string> published_profile_names();
// Throws std::invalid_argument listing the known names when `name` is not one.
DeviceProfile published_device_profile(const std::string& name);
NetworkProfile published_network_profile(const std::string& name);

// The embedded files as they are in the source tree: file name → text.
struct EmbeddedFile {
  std::string_view name;  // "h100-sxm.device.json"
  std::string_view text;
};
const std::vector<EmbeddedFile>& published_profile_files();

}  // namespace gpuledger::perf
