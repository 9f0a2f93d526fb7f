// The device and network profiles as JSON — the only place they meet JSON.
// Schemas (docs/perf-model.md "Schemas"):
//   gpuledger.device_profile/1   one device: peaks, GEMM tables, bandwidths, attention, floor, host copy
//   gpuledger.network_profile/1  ranks per node, intra- and inter-node links, measured samples
// Every figure is an object {"value": number, "source": string}; a table
// carries one "source" for its points. Reading checks the schema name, every
// field's type, and then the typed profile (validate_*_profile); a problem
// throws std::invalid_argument naming the origin and the JSON path (exit 2 at
// the command line). Unknown fields are refused, so a misspelt one is not
// silently ignored.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "perf/device_profile.h"
#include "perf/network_profile.h"

namespace gpuledger::perf {

inline constexpr const char* kDeviceProfileSchema = "gpuledger.device_profile/1";
inline constexpr const char* kNetworkProfileSchema = "gpuledger.network_profile/1";

nlohmann::json device_profile_to_json(const DeviceProfile& p);
// `origin` names the document in messages (a path, or "published profile h100-sxm").
DeviceProfile device_profile_from_json(const nlohmann::json& j, const std::string& origin);

nlohmann::json network_profile_to_json(const NetworkProfile& p);
NetworkProfile network_profile_from_json(const nlohmann::json& j, const std::string& origin);

// Reading a file: parse errors name the line and column.
DeviceProfile load_device_profile(const std::string& path);
NetworkProfile load_network_profile(const std::string& path);

}  // namespace gpuledger::perf
