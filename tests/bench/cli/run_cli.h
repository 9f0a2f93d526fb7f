// Runs the gpuledger binary with arguments and captures its exit status,
// stdout and stderr (separately), for CLI tests.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpuledger::testing {

struct CliResult {
  int status = -1;
  std::string out, err;
  nlohmann::json json() const { return nlohmann::json::parse(out); }  // for --json -
};

CliResult run_cli(const std::vector<std::string>& args);
// A unique scratch folder under the build tree's temp dir (removed by the OS / next run).
std::string scratch_dir(const std::string& name);
// Writes `text` to `path`.
void write_file(const std::string& path, const std::string& text);
// Parses the JSON file at `path` (a report the binary wrote).
nlohmann::json read_json(const std::string& path);
// Whether `what` occurs in `s` (output checks).
inline bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

}  // namespace gpuledger::testing
