// The train record as report JSON (docs/report.md, kind "train"): every
// reported rank's record and its checks, the job's summary (loss, step time
// split, tokens/s, MFU, HFU), the status of the first failure and, after an
// out-of-memory, what would fit.
#pragma once
#include <nlohmann/json.hpp>

#include "bench/record/train_record.h"

namespace gpuledger::report {

nlohmann::json train_report_json(const run::TrainRecord& record);
// What a rank that fails inside a step of an MPI job writes before the job is
// aborted: its own record, without the job's memory limit and hosts.
nlohmann::json train_abort_report_json(const run::TrainRecord& record);

// One rank's record as written under ranks[i] (its analytic section, the
// measured ledger, comm, times, FLOPs, status), and back: an MPI job's ranks
// send their records to rank 0 in this form.
nlohmann::json train_rank_json(const bench::TrainRankRecord& r);
bench::TrainRankRecord train_rank_from_json(const nlohmann::json& j);

}  // namespace gpuledger::report
