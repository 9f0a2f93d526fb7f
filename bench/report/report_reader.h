// Reading reports back: `check`, `regress` and `sweep` read report files that a
// user may have edited, truncated or written by hand. Every read goes through a
// JsonView, which checks a value's type before reading it and names the file
// and the JSON path of whatever is wrong:
//   r.json: ranks[0].measured.peak_bytes: expected a number, found a string
// A malformed report is bad input (ReportFormatError is a ConfigError: exit 2),
// never a crash, an over-read or a figure made up from a missing field.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/model_config.h"

namespace gpuledger::report {

// Reports larger than this are refused before they are read (a 16,384-rank
// meta report is about 100 MiB; parsing holds several times the file size).
inline constexpr int64_t kMaxReportFileBytes = int64_t{256} << 20;

class ReportFormatError : public ConfigError {
 public:
  ReportFormatError(const std::string& file, const std::string& json_path, const std::string& what);
};

// A read-only, type-checked view of one value inside a report.
class JsonView {
 public:
  JsonView(const nlohmann::json& value, std::string file, std::string json_path = "");

  // Objects. `at` requires the member; `find` returns nullopt when it is
  // absent or null; `has` says whether it is present and not null.
  JsonView at(std::string_view key) const;
  std::optional<JsonView> find(std::string_view key) const;
  bool has(std::string_view key) const;
  std::vector<std::pair<std::string, JsonView>> members() const;

  // Arrays.
  JsonView at(size_t index) const;
  size_t size() const;
  std::vector<JsonView> elements() const;

  bool is_object() const { return value_->is_object(); }
  bool is_array() const { return value_->is_array(); }
  bool is_null() const { return value_->is_null(); }

  double number() const;    // a finite number
  int64_t integer() const;  // an integral number that fits int64
  std::string string() const;
  bool boolean() const;

  // A member's value, or `fallback` when the member is absent or null; a
  // member of the wrong type still throws.
  double number_or(std::string_view key, double fallback) const;
  std::string string_or(std::string_view key, const std::string& fallback) const;

  const nlohmann::json& raw() const { return *value_; }
  const std::string& json_path() const { return path_; }
  const std::string& file() const { return *file_; }
  [[noreturn]] void fail(const std::string& what) const;

 private:
  JsonView(const nlohmann::json& value, std::shared_ptr<const std::string> file, std::string json_path);
  void require(bool ok, const char* expected) const;

  const nlohmann::json* value_;
  std::shared_ptr<const std::string> file_;
  std::string path_;
};

// A report file, parsed, whose envelope was checked: an object whose "schema"
// is gpuledger.report/1 and whose "kind" is a string. Views point into `doc`:
// keep the ReportFile alive while they are used.
struct ReportFile {
  nlohmann::json doc;
  std::string file;
  JsonView root() const { return JsonView(doc, file); }
  std::string kind() const { return root().at("kind").string(); }
};

// Reads `path` as JSON: a regular file no larger than kMaxReportFileBytes,
// valid JSON (line:column on a syntax error); for the files beside reports
// (a sweep's index and point files). Throws ReportFormatError.
nlohmann::json read_json_file(const std::string& path);
// Reads `path`: a regular file no larger than kMaxReportFileBytes, valid JSON
// (line:column on a syntax error), the envelope above. Throws ReportFormatError.
ReportFile read_report_file(const std::string& path);
// The same, for callers that keep the document only.
inline nlohmann::json read_report(const std::string& path) { return read_report_file(path).doc; }

}  // namespace gpuledger::report
