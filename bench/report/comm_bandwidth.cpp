// Per-collective algbw and busbw (see comm_bandwidth.h).
#include "bench/report/comm_bandwidth.h"

#include "core/collective.h"

namespace gpuledger::report {

using nlohmann::json;

json comm_bandwidth_json(const std::map<std::string, CommCount>& by_key, const Layout& l) {
  json out = json::object();
  for (const auto& [key, c] : by_key) {
    const auto at = key.find('@');
    const std::string kind = key.substr(0, at);
    const std::string group = at == std::string::npos ? "" : key.substr(at + 1);
    const auto typed = parse_comm_key(key);
    const int64_t n = typed ? comm_group_size(typed->group, l) : 1;
    const double factor = typed ? busbw_factor(typed->kind, n) : 1.0;
    const bool timed = c.seconds > 0;
    const double algbw = timed ? static_cast<double>(c.bytes) / c.seconds : 0.0;
    out[key] = {{"kind", kind},
                {"group", group},
                {"group_size", n},
                {"calls", c.calls},
                {"bytes", c.bytes},
                {"seconds", c.seconds},
                {"algbw_bytes_per_s", timed ? json(algbw) : json(nullptr)},
                {"busbw_factor", factor},
                {"busbw_bytes_per_s", timed ? json(algbw * factor) : json(nullptr)}};
  }
  return out;
}

}  // namespace gpuledger::report
