// Trace slices as JSON (see trace_json.h).
#include "bench/report/trace_json.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>

namespace gpuledger::report {

using nlohmann::json;

json trace_slices_json(const std::vector<TraceSlice>& slices) {
  json out = json::array();
  for (const auto& s : slices) out.push_back(json::array({s.stream, s.name, s.start_us, s.dur_us, s.flops, s.bytes}));
  return out;
}

std::vector<TraceSlice> trace_slices_from_json(const json& j) {
  if (!j.is_array()) throw std::invalid_argument("trace slices: expected an array");
  std::vector<TraceSlice> out;
  out.reserve(j.size());
  for (const auto& e : j) {
    if (!e.is_array() || e.size() != 6)
      throw std::invalid_argument("trace slices: expected [stream, name, start, dur, flops, bytes]");
    out.push_back({e[0].get<std::string>(), e[1].get<std::string>(), e[2].get<double>(), e[3].get<double>(),
                   e[4].get<int64_t>(), e[5].get<int64_t>()});
  }
  return out;
}

namespace {

// "compute" is thread 0; the comm streams follow in name order.
std::map<std::string, int64_t> stream_ids(const std::vector<TraceSlice>& slices) {
  std::vector<std::string> names;
  for (const auto& s : slices)
    if (s.stream != "compute" && std::find(names.begin(), names.end(), s.stream) == names.end())
      names.push_back(s.stream);
  std::sort(names.begin(), names.end());
  std::map<std::string, int64_t> ids{{"compute", 0}};
  for (size_t i = 0; i < names.size(); ++i) ids[names[i]] = static_cast<int64_t>(i) + 1;
  return ids;
}

json metadata(const char* what, int64_t pid, std::optional<int64_t> tid, const std::string& name) {
  json m = {{"ph", "M"}, {"name", what}, {"pid", pid}, {"args", {{"name", name}}}};
  if (tid) m["tid"] = *tid;
  return m;
}

}  // namespace

json chrome_trace_json(const std::vector<RankTrace>& ranks, const std::string& what) {
  double origin_us = std::numeric_limits<double>::infinity();
  for (const auto& r : ranks)
    for (const auto& s : *r.slices) origin_us = std::min(origin_us, s.start_us);
  if (!std::isfinite(origin_us)) origin_us = 0;
  json events = json::array();
  int64_t dropped = 0;
  for (const auto& r : ranks) {
    dropped += r.dropped;
    events.push_back(
        metadata("process_name", r.rank, std::nullopt, r.role.empty() ? "rank " + std::to_string(r.rank) : r.role));
    events.push_back(
        {{"ph", "M"}, {"name", "process_sort_index"}, {"pid", r.rank}, {"args", {{"sort_index", r.rank}}}});
    const auto ids = stream_ids(*r.slices);
    for (const auto& [stream, tid] : ids) events.push_back(metadata("thread_name", r.rank, tid, stream));
    for (const auto& s : *r.slices) {
      json args = json::object();
      if (s.flops > 0) args["flops"] = s.flops;
      if (s.bytes > 0) args["bytes"] = s.bytes;
      events.push_back({{"ph", "X"},
                        {"name", s.name},
                        {"cat", s.stream},
                        {"pid", r.rank},
                        {"tid", ids.at(s.stream)},
                        {"ts", s.start_us - origin_us},
                        {"dur", s.dur_us},
                        {"args", std::move(args)}});
    }
  }
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData", {{"producer", "gpuledger"}, {"what", what}, {"slices_dropped", dropped}}}};
}

}  // namespace gpuledger::report
