// Ledger and comm counters as JSON (see ledger_json.h).
#include "bench/report/ledger_json.h"

namespace gpuledger::report {

using nlohmann::json;

json account_bytes_json(const AccountBytes& a) {
  json j = json::object();
  for (Account acc : kAllAccounts) j[std::string(account_name(acc))] = a[acc];
  return j;
}

AccountBytes account_bytes_from_json(const json& j) {
  AccountBytes a;
  for (Account acc : kAllAccounts) a[acc] = j.at(std::string(account_name(acc))).get<int64_t>();
  return a;
}

json ledger_json(const Ledger& l, bool with_timeline) {
  AccountBytes counts;
  for (Account a : kAllAccounts) counts[a] = l.count(a);
  json j = {{"peak_bytes", l.peak_total()},
            {"at_peak", account_bytes_json(l.at_peak())},
            {"peak_by_account", account_bytes_json(l.peak_by_account())},
            {"live_by_account", account_bytes_json(l.live_by_account())},
            {"alloc_count", account_bytes_json(counts)}};
  j["limit_bytes"] = l.limit() ? json(*l.limit()) : json(nullptr);
  if (l.failure()) {
    const auto& f = *l.failure();
    j["at_failure"] = {{"live", account_bytes_json(f.live)}, {"live_total", f.live.total()},
                       {"refused_account", std::string(account_name(f.account))},
                       {"refused_bytes", f.requested_bytes}, {"refused_what", f.what}};
  }
  if (with_timeline) {
    j["timeline"] = json::array();
    for (const auto& s : l.timeline())
      j["timeline"].push_back({{"phase", s.phase}, {"live", account_bytes_json(s.live)},
                               {"live_total", s.live.total()}, {"peak_since_prev", s.peak_since_prev}});
  }
  return j;
}

json comm_json(const CommCounters& c) {
  json j = json::object();
  for (const auto& [key, v] : c.by_key()) j[key] = {{"calls", v.calls}, {"bytes", v.bytes}, {"seconds", v.seconds}};
  return j;
}

}  // namespace gpuledger::report
