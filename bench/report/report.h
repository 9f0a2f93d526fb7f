// The report document (docs/architecture.md "Report schema", gpuledger.report/1): its
// skeleton, the config and environment sections, and the atomic writer. The
// JSON document is the result model; the console tables are rendered from it.
#pragma once
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/model_config.h"
#include "core/resolved_config.h"

namespace gpuledger::report {

inline constexpr std::string_view kSchema = "gpuledger.report/1";

// {"schema", "kind", "status": "ok", "tool": {...}, "env": {"host", "hosts", "when_utc", "job_id",
// "fingerprint"} (fingerprint.h), "checks": []}
nlohmann::json make_report(std::string_view kind);
nlohmann::json model_json(const ModelConfig& m);
nlohmann::json config_json(const ResolvedConfig& r);

// Writes `doc` to `path` atomically (temporary file in the same folder, then
// rename), creating the folder; "-" writes to stdout. Throws std::runtime_error.
void write_report(const nlohmann::json& doc, const std::string& path);
// Reading reports back: report_reader.h.

std::string host_name();
std::string git_commit();  // the commit the binary was built from, or "unknown"

}  // namespace gpuledger::report
