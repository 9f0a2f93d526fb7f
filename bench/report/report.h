// The report document (docs/architecture.md "Report schema", gpuledger.report/1): its
// skeleton, the config and environment sections, and the atomic writer. The
// JSON document is the result model; the console tables are rendered from it.
#pragma once
#include <optional>
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
// A figure that may be unknown: the number, or null.
inline nlohmann::json optional_json(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nullptr; }

// Writes `doc` to `path`, respecting what is there: "-" and /dev/stdout write
// to stdout; a device, FIFO or socket is written through (never replaced); a
// symlink is followed (the link stays, its target is written); a regular file
// or a new path is written atomically (temporary file in the same folder, then
// rename, the temporary removed on every error), creating the folder. Throws
// std::runtime_error.
void write_report(const nlohmann::json& doc, const std::string& path);
// True for the paths that mean stdout: "-" and /dev/stdout.
bool is_stdout_path(const std::string& path);
// Why a report could not be written to `path`, checked before a run starts
// (a directory, an unwritable file or folder, a control character in the
// name); "" when it can.
std::string report_destination_problem(const std::string& path);
// Why reports could not be written into the folder `dir` (it exists and is not
// a folder, or the nearest existing folder above it is not writable); "" when they can.
std::string output_dir_problem(const std::string& dir);
// Reading reports back: report_reader.h.

std::string host_name();
std::string git_commit();  // the commit the binary was built from, or "unknown"

}  // namespace gpuledger::report
