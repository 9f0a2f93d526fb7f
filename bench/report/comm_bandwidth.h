// A rank's collectives as nccl-tests reports them: per "<kind>@<group>", the
// group's size, the algorithm bandwidth (bytes / seconds, with bytes sized as
// nccl-tests sizes a call: comm/comm.h) and the bus bandwidth, algbw times the
// factor that makes it comparable with the link's speed whatever the group
// size (nccl-tests doc/PERFORMANCE.md: all-reduce 2(n−1)/n, reduce-scatter and
// all-gather (n−1)/n, broadcast and send/recv 1).
#pragma once
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "comm/comm.h"
#include "core/layout.h"

namespace gpuledger::report {

// The size of a group named in the counters: tp, dp, pp from the layout; emb
// (the tied embedding's first and last stage) 2.
int64_t comm_group_size(const std::string& group, const Layout& l);
// The bus-bandwidth factor of a kind ("all_reduce", …) over n ranks.
double busbw_factor(const std::string& kind, int64_t n);

// {"all_reduce@dp": {"kind", "group", "group_size", "bytes", "seconds",
//  "algbw_bytes_per_s", "busbw_factor", "busbw_bytes_per_s"}, …}; the
// bandwidths are null when no time was measured (the meta backend).
nlohmann::json comm_bandwidth_json(const std::map<std::string, CommCount>& by_key, const Layout& l);

}  // namespace gpuledger::report
