// The checked reading of one JSON object's fields for the profile readers
// (profile_json.cpp): each accessor names the JSON path of what is wrong, and
// finish() refuses fields that were never asked for. Internal to perf/.
#pragma once
#include <cstdint>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "perf/sourced.h"

namespace gpuledger::perf::detail {

class JsonFields {
 public:
  // Throws unless `j` is an object; `path` is its JSON path ("$.links.intra_node").
  JsonFields(const nlohmann::json& j, std::string origin, std::string path);

  bool has(const std::string& key) const { return j_.contains(key); }
  const nlohmann::json& raw(const std::string& key);  // any type; required
  JsonFields object(const std::string& key);          // required object
  std::string string(const std::string& key);
  double number(const std::string& key);
  int64_t integer(const std::string& key);
  bool boolean(const std::string& key);
  Sourced sourced(const std::string& key);  // {"value": number, "source": non-empty string}
  // Throws naming the first field that was never read.
  void finish() const;

  [[noreturn]] void fail(const std::string& key, const std::string& what) const;
  const std::string& origin() const { return origin_; }
  std::string path_of(const std::string& key) const { return path_ + "." + key; }
  const nlohmann::json& node() const { return j_; }

 private:
  const nlohmann::json& j_;
  std::string origin_, path_;
  std::set<std::string> read_;
};

}  // namespace gpuledger::perf::detail
