// The kv record as report JSON (docs/report.md, kind "kv").
#pragma once
#include <nlohmann/json.hpp>

#include "bench/record/kv_record.h"

namespace gpuledger::report {

nlohmann::json kv_report_json(const run::KvRecord& record);

}  // namespace gpuledger::report
