// A rank's collectives as nccl-tests reports them: per "<kind>@<group>", the
// group's size, the algorithm bandwidth (bytes / seconds, with bytes sized as
// nccl-tests sizes a call: comm/comm_bytes.h) and the bus bandwidth, algbw
// times the factor that makes it comparable with the link's speed whatever the
// group size. Group sizes and factors come from core/collective.h, their one home.
#pragma once
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "comm/comm.h"
#include "core/layout.h"

namespace gpuledger::report {

// {"all_reduce@dp": {"kind", "group", "group_size", "bytes", "seconds",
//  "algbw_bytes_per_s", "busbw_factor", "busbw_bytes_per_s"}, …}; the
// bandwidths are null when no time was measured (the meta backend). A key
// that names no known collective or group gets group size 1 and factor 1.
nlohmann::json comm_bandwidth_json(const std::map<std::string, CommCount>& by_key, const Layout& l);

}  // namespace gpuledger::report
