// The measured side of a rank's record: a ledger's figures and comm counters
// as report JSON, and back (an MPI job's ranks send their records to rank 0
// in this form).
#pragma once
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/record/ledger_record.h"
#include "comm/comm.h"

namespace gpuledger::report {

// {"peak_bytes" (device accounts), "peak_host_bytes" (account host), "at_peak": {ACCOUNT: bytes}, "peak_by_account",
// "live_by_account",
//  "alloc_count", "limit_bytes" | null, ["at_failure": {"live", "live_total", "refused_account",
//  "refused_bytes", "refused_what"}], ["timeline": [{"phase", "live": {...}, "peak_since_prev"}]]}
nlohmann::json ledger_json(const bench::LedgerRecord& ledger);
bench::LedgerRecord ledger_record_from_json(const nlohmann::json& j);
nlohmann::json account_bytes_json(const AccountBytes& a);
// {"events", "cublas_workspace_bytes", "peak_requested_bytes", "peak_allocated_bytes",
//  "peak_reserved_bytes", "segments"}: a run's allocations through PyTorch's caching allocator.
nlohmann::json torch_replay_json(const TorchMemoryReplay& t);
TorchMemoryReplay torch_replay_from_json(const nlohmann::json& j);
AccountBytes account_bytes_from_json(const nlohmann::json& j);
// {"all_reduce@dp": {"calls", "bytes", "seconds"}, ...}
nlohmann::json comm_json(const std::map<std::string, CommCount>& by_key);
std::map<std::string, CommCount> comm_from_json(const nlohmann::json& j);

}  // namespace gpuledger::report
