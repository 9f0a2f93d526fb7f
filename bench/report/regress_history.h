// `gpuledger regress --history FILE.jsonl`: one line per gated run, appended,
// so that a point's MFU and tokens/s can be followed night after night
// (scripts/plot.py --history draws them). The line's fields are listed in
// docs/regress.md "History".
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "bench/report/regress_gate.h"

namespace gpuledger::report {

// {"when_utc", "point", "commit", "host", "job_id", "fingerprint", "status": "ok" | "failed",
//  "metrics": {...}, "regressions": [...]} — `report` is the first new report.
nlohmann::json history_line(const std::string& point, const nlohmann::json& report, const GateResult& g);
// Appends one line (the JSON on one line, then '\n'); throws std::runtime_error naming the file.
void append_history(const std::string& path, const nlohmann::json& line);

}  // namespace gpuledger::report
