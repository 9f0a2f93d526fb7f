// The measured side of a rank's record: a Ledger and comm counters as report JSON.
#pragma once
#include <nlohmann/json.hpp>

#include "kernels/ledger.h"
#include "comm/comm.h"

namespace gpuledger::report {

// {"peak_bytes", "at_peak": {ACCOUNT: bytes}, "peak_by_account", "live_by_account",
//  "alloc_count", "limit_bytes" | null, ["at_failure": {"live", "live_total", "refused_account",
//  "refused_bytes", "refused_what"}], ["timeline": [{"phase", "live": {...}, "peak_since_prev"}]]}
nlohmann::json ledger_json(const Ledger& ledger, bool with_timeline);
nlohmann::json account_bytes_json(const AccountBytes& a);
AccountBytes account_bytes_from_json(const nlohmann::json& j);   // the inverse
// {"all_reduce@dp": {"calls", "bytes", "seconds"}, ...}
nlohmann::json comm_json(const CommCounters& c);

}  // namespace gpuledger::report
