// Per-collective algbw and busbw (see comm_bandwidth.h).
#include "bench/report/comm_bandwidth.h"

namespace gpuledger::report {

using nlohmann::json;

int64_t comm_group_size(const std::string& group, const Layout& l) {
  if (group == "tp") return l.tp;
  if (group == "dp") return l.dp * l.cp;  // with cp > 1 the data-parallel group with cp
  if (group == "cp") return l.cp;
  if (group == "pp") return l.pp;
  if (group == "emb") return 2;
  if (group == "ep") return l.ep;
  if (group == "edp") return l.dp / l.ep;  // the expert-data-parallel group
  return 1;
}

double busbw_factor(const std::string& kind, int64_t n) {
  if (n <= 1) return 1.0;
  const double d = static_cast<double>(n);
  if (kind == "all_reduce") return 2.0 * (d - 1) / d;
  if (kind == "reduce_scatter" || kind == "all_gather" || kind == "all_to_all") return (d - 1) / d;
  return 1.0;  // broadcast, send, recv
}

json comm_bandwidth_json(const std::map<std::string, CommCount>& by_key, const Layout& l) {
  json out = json::object();
  for (const auto& [key, c] : by_key) {
    const auto at = key.find('@');
    const std::string kind = key.substr(0, at);
    const std::string group = at == std::string::npos ? "" : key.substr(at + 1);
    const int64_t n = comm_group_size(group, l);
    const double factor = busbw_factor(kind, n);
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
