// Ledger figures and comm counters as JSON, and back (see ledger_json.h).
#include "bench/report/ledger_json.h"

#include <stdexcept>

namespace gpuledger::report {

using nlohmann::json;

json account_bytes_json(const AccountBytes& a) {
  json j = json::object();
  for (Account acc : kAllAccounts) j[std::string(account_name(acc))] = a[acc];
  return j;
}

AccountBytes account_bytes_from_json(const json& j) {
  AccountBytes a;
  for (Account acc : kAllAccounts) {
    // A report written before the host account existed held no host memory.
    if (acc == Account::kHost && !j.contains("host")) continue;
    a[acc] = j.at(std::string(account_name(acc))).get<int64_t>();
  }
  return a;
}

json ledger_json(const bench::LedgerRecord& l) {
  json j = {{"peak_bytes", l.peak_bytes},
            {"peak_host_bytes", l.peak_by_account[Account::kHost]},
            {"at_peak", account_bytes_json(l.at_peak)},
            {"peak_by_account", account_bytes_json(l.peak_by_account)},
            {"live_by_account", account_bytes_json(l.live_by_account)},
            {"alloc_count", account_bytes_json(l.alloc_count)}};
  j["limit_bytes"] = l.limit_bytes ? json(*l.limit_bytes) : json(nullptr);
  if (l.failure) {
    const auto& f = *l.failure;
    j["at_failure"] = {{"live", account_bytes_json(f.live)},
                       {"live_total", f.live.device_total()},
                       {"refused_account", std::string(account_name(f.account))},
                       {"refused_bytes", f.requested_bytes},
                       {"refused_what", f.what}};
  }
  if (const auto& t = l.torch) j["torch_caching_allocator"] = torch_replay_json(*t);
  if (l.with_timeline) {
    j["timeline"] = json::array();
    for (const auto& s : l.timeline)
      j["timeline"].push_back({{"phase", s.phase},
                               {"live", account_bytes_json(s.live)},
                               {"live_total", s.live.device_total()},
                               {"peak_since_prev", s.peak_since_prev}});
  }
  return j;
}

json torch_replay_json(const TorchMemoryReplay& t) {
  return {{"events", t.events},
          {"cublas_workspace_bytes", t.cublas_workspace_bytes},
          {"peak_requested_bytes", t.peak_requested_bytes},
          {"peak_allocated_bytes", t.peak_allocated_bytes},
          {"peak_reserved_bytes", t.peak_reserved_bytes},
          {"segments", t.segments}};
}

TorchMemoryReplay torch_replay_from_json(const json& j) {
  return TorchMemoryReplay{j.at("events").get<int64_t>(),
                           j.at("cublas_workspace_bytes").get<int64_t>(),
                           j.at("peak_requested_bytes").get<int64_t>(),
                           j.at("peak_allocated_bytes").get<int64_t>(),
                           j.at("peak_reserved_bytes").get<int64_t>(),
                           j.at("segments").get<int64_t>()};
}

bench::LedgerRecord ledger_record_from_json(const json& j) {
  bench::LedgerRecord l;
  l.peak_bytes = j.at("peak_bytes").get<int64_t>();
  l.at_peak = account_bytes_from_json(j.at("at_peak"));
  l.peak_by_account = account_bytes_from_json(j.at("peak_by_account"));
  l.live_by_account = account_bytes_from_json(j.at("live_by_account"));
  l.alloc_count = account_bytes_from_json(j.at("alloc_count"));
  if (!j.at("limit_bytes").is_null()) l.limit_bytes = j["limit_bytes"].get<int64_t>();
  if (j.contains("at_failure")) {
    const json& f = j["at_failure"];
    const auto account = account_from_name(f.at("refused_account").get<std::string>());
    if (!account) throw std::runtime_error("unknown account in a rank's record: " + f["refused_account"].dump());
    l.failure = LedgerFailure{account_bytes_from_json(f.at("live")), *account, f.at("refused_bytes").get<int64_t>(),
                              f.at("refused_what").get<std::string>()};
  }
  if (j.contains("torch_caching_allocator")) l.torch = torch_replay_from_json(j["torch_caching_allocator"]);
  l.with_timeline = j.contains("timeline");
  for (const auto& s : j.value("timeline", json::array()))
    l.timeline.push_back({s.at("phase").get<std::string>(), account_bytes_from_json(s.at("live")),
                          s.at("peak_since_prev").get<int64_t>()});
  return l;
}

json comm_json(const std::map<std::string, CommCount>& by_key) {
  json j = json::object();
  for (const auto& [key, v] : by_key) j[key] = {{"calls", v.calls}, {"bytes", v.bytes}, {"seconds", v.seconds}};
  return j;
}

std::map<std::string, CommCount> comm_from_json(const json& j) {
  std::map<std::string, CommCount> by_key;
  for (const auto& [key, v] : j.items())
    by_key[key] = {v.at("calls").get<int64_t>(), v.at("bytes").get<int64_t>(), v.at("seconds").get<double>()};
  return by_key;
}

}  // namespace gpuledger::report
