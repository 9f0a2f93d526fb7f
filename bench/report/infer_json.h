// The infer record as report JSON (docs/report.md, kind "infer"): the config
// with the serving options, every rank's record and checks, the summary
// (prefill and decode throughput, decode bandwidth beside MFU, capacity, the
// KV dtype's attention error) and the status of the first failure.
#pragma once
#include <nlohmann/json.hpp>

#include "bench/record/infer_record.h"

namespace gpuledger::report {

nlohmann::json infer_report_json(const run::InferRecord& record);

// One rank's record as written under ranks[i], and back: an MPI job's ranks
// send their records to rank 0 in this form.
nlohmann::json infer_rank_json(const run::InferRankRecord& r);
run::InferRankRecord infer_rank_from_json(const nlohmann::json& j);

}  // namespace gpuledger::report
