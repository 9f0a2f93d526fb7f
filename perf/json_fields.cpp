// Checked field access for the profile readers (see json_fields.h).
#include "perf/json_fields.h"

#include <cmath>
#include <stdexcept>

namespace gpuledger::perf::detail {

using nlohmann::json;

JsonFields::JsonFields(const json& j, std::string origin, std::string path)
    : j_(j), origin_(std::move(origin)), path_(std::move(path)) {
  if (!j_.is_object())
    throw std::invalid_argument(origin_ + ": " + path_ + ": expected an object, got " + std::string(j_.type_name()));
}

void JsonFields::fail(const std::string& key, const std::string& what) const {
  throw std::invalid_argument(origin_ + ": " + path_of(key) + ": " + what);
}

const json& JsonFields::raw(const std::string& key) {
  if (!j_.contains(key)) fail(key, "missing");
  read_.insert(key);
  return j_.at(key);
}

JsonFields JsonFields::object(const std::string& key) { return JsonFields(raw(key), origin_, path_of(key)); }

std::string JsonFields::string(const std::string& key) {
  const json& v = raw(key);
  if (!v.is_string()) fail(key, std::string("expected a string, got ") + v.type_name());
  return v.get<std::string>();
}

double JsonFields::number(const std::string& key) {
  const json& v = raw(key);
  if (!v.is_number()) fail(key, std::string("expected a number, got ") + v.type_name());
  const double d = v.get<double>();
  if (!std::isfinite(d)) fail(key, "not finite");
  return d;
}

int64_t JsonFields::integer(const std::string& key) {
  const json& v = raw(key);
  if (!v.is_number_integer()) fail(key, std::string("expected an integer, got ") + v.type_name());
  return v.get<int64_t>();
}

bool JsonFields::boolean(const std::string& key) {
  const json& v = raw(key);
  if (!v.is_boolean()) fail(key, std::string("expected true or false, got ") + v.type_name());
  return v.get<bool>();
}

Sourced JsonFields::sourced(const std::string& key) {
  JsonFields f = object(key);
  Sourced s{f.number("value"), f.string("source")};
  if (s.source.empty()) f.fail("source", "empty: every figure names where it came from");
  f.finish();
  return s;
}

void JsonFields::finish() const {
  for (const auto& [key, value] : j_.items())
    if (!read_.count(key)) fail(key, "unknown field");
}

}  // namespace gpuledger::perf::detail
