// Checked reading of report files (see report_reader.h).
#include "bench/report/report_reader.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "bench/report/report.h"

namespace gpuledger::report {

using nlohmann::json;

namespace {

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float: return "a number";
    default: return "something else";
  }
}

// "line:column" of byte offset `byte` in `text`, 1-based.
std::string line_column(const std::string& text, size_t byte) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return fmt::format("{}:{}", line, col);
}

// nlohmann's message without its "[json.exception.parse_error.101] parse error at
// line 1, column 5: " prefix: the location is given separately.
std::string library_reason(const std::string& what) {
  std::string reason = what;
  if (reason.rfind("[json.exception.", 0) == 0 && reason.find("] ") != std::string::npos)
    reason = reason.substr(reason.find("] ") + 2);
  const auto column = reason.find(", column ");
  if (reason.rfind("parse error", 0) == 0 && column != std::string::npos &&
      reason.find(": ", column) != std::string::npos)
    reason = reason.substr(reason.find(": ", column) + 2);
  return reason;
}

std::string read_file_text(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw ReportFormatError(path, "", "cannot read: no such file");
  if (S_ISDIR(st.st_mode)) throw ReportFormatError(path, "", "is a directory, not a report");
  if (!S_ISREG(st.st_mode)) throw ReportFormatError(path, "", "not a regular file");
  if (st.st_size > kMaxReportFileBytes)
    throw ReportFormatError(path, "",
                            fmt::format("{} bytes: larger than the {} MiB a report may have",
                                        static_cast<int64_t>(st.st_size), kMaxReportFileBytes >> 20));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ReportFormatError(path, "", "cannot open for reading");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

ReportFormatError::ReportFormatError(const std::string& file, const std::string& json_path, const std::string& what)
    : ConfigError("report", json_path.empty() ? file + ": " + what : file + ": " + json_path + ": " + what) {}

JsonView::JsonView(const json& value, std::string file, std::string json_path)
    : JsonView(value, std::make_shared<const std::string>(std::move(file)), std::move(json_path)) {}

JsonView::JsonView(const json& value, std::shared_ptr<const std::string> file, std::string json_path)
    : value_(&value), file_(std::move(file)), path_(std::move(json_path)) {}

void JsonView::fail(const std::string& what) const {
  throw ReportFormatError(*file_, path_.empty() ? "(top level)" : path_, what);
}

void JsonView::require(bool ok, const char* expected) const {
  if (!ok) fail(fmt::format("expected {}, found {}", expected, type_name(*value_)));
}

JsonView JsonView::at(std::string_view key) const {
  require(value_->is_object(), "an object");
  const auto it = value_->find(key);
  const std::string child = path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  if (it == value_->end()) throw ReportFormatError(*file_, child, "missing");
  return JsonView(*it, file_, child);
}

std::optional<JsonView> JsonView::find(std::string_view key) const {
  require(value_->is_object(), "an object");
  const auto it = value_->find(key);
  if (it == value_->end() || it->is_null()) return std::nullopt;
  return JsonView(*it, file_, path_.empty() ? std::string(key) : path_ + "." + std::string(key));
}

bool JsonView::has(std::string_view key) const { return find(key).has_value(); }

std::vector<std::pair<std::string, JsonView>> JsonView::members() const {
  require(value_->is_object(), "an object");
  std::vector<std::pair<std::string, JsonView>> out;
  for (auto it = value_->begin(); it != value_->end(); ++it)
    out.emplace_back(it.key(), JsonView(it.value(), file_, path_.empty() ? it.key() : path_ + "." + it.key()));
  return out;
}

JsonView JsonView::at(size_t index) const {
  require(value_->is_array(), "an array");
  if (index >= value_->size()) fail(fmt::format("has {} elements; element {} is missing", value_->size(), index));
  return JsonView((*value_)[index], file_, fmt::format("{}[{}]", path_, index));
}

size_t JsonView::size() const {
  require(value_->is_array(), "an array");
  return value_->size();
}

std::vector<JsonView> JsonView::elements() const {
  std::vector<JsonView> out;
  const size_t n = size();
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.push_back(at(i));
  return out;
}

double JsonView::number() const {
  require(value_->is_number(), "a number");
  const double v = value_->get<double>();
  if (!std::isfinite(v)) fail("not a finite number");
  return v;
}

int64_t JsonView::integer() const {
  require(value_->is_number(), "a number");
  // nlohmann's is_number_integer() is also true for unsigned values: test those first.
  if (value_->is_number_unsigned()) {
    const auto u = value_->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) fail("too large for a 64-bit integer");
    return static_cast<int64_t>(u);
  }
  if (value_->is_number_integer()) return value_->get<int64_t>();
  const double d = value_->get<double>();
  // 2^63 is the first double outside int64; every double below it is exact there.
  if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) >= 9.2233720368547758e18)
    fail(fmt::format("expected an integer, found {}", value_->dump()));
  return static_cast<int64_t>(d);
}

std::string JsonView::string() const {
  require(value_->is_string(), "a string");
  return value_->get<std::string>();
}

bool JsonView::boolean() const {
  require(value_->is_boolean(), "a boolean");
  return value_->get<bool>();
}

double JsonView::number_or(std::string_view key, double fallback) const {
  const auto v = find(key);
  return v ? v->number() : fallback;
}

std::string JsonView::string_or(std::string_view key, const std::string& fallback) const {
  const auto v = find(key);
  return v ? v->string() : fallback;
}

json read_json_file(const std::string& path) {
  const std::string text = read_file_text(path);
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    throw ReportFormatError(path + ":" + line_column(text, e.byte), "", "malformed JSON: " + library_reason(e.what()));
  } catch (const json::exception& e) {  // e.g. a number beyond double's range
    throw ReportFormatError(path, "", "malformed JSON: " + library_reason(e.what()));
  }
}

ReportFile read_report_file(const std::string& path) {
  ReportFile r;
  r.file = path;
  r.doc = read_json_file(path);
  const JsonView root = r.root();
  if (!root.is_object()) root.fail(fmt::format("expected a report (a JSON object), found {}", type_name(r.doc)));
  const std::string schema = root.at("schema").string();
  if (schema != kSchema) root.at("schema").fail(fmt::format("'{}' is not {}", schema, kSchema));
  root.at("kind").string();
  return r;
}

}  // namespace gpuledger::report
