// Trace slices as JSON: the compact form one rank's slices travel in under MPI,
// and the Chrome trace-event format the whole run is written in (`train
// --trace FILE.json`; it opens in Perfetto and chrome://tracing): one process
// per rank, one thread per stream ("compute" first, then "comm <group>" in
// name order), each op or collective a complete event ("ph": "X") with its
// FLOPs or bytes as args. Timestamps are microseconds from the run's first slice.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/trace.h"

namespace gpuledger::report {

// [[stream, name, start_us, dur_us, flops, bytes], …] and back; the reader
// throws std::invalid_argument on anything else.
nlohmann::json trace_slices_json(const std::vector<TraceSlice>& slices);
std::vector<TraceSlice> trace_slices_from_json(const nlohmann::json& j);

struct RankTrace {
  int64_t rank = 0;
  std::string role;  // "r0 pp0 first": the process's name
  const std::vector<TraceSlice>* slices = nullptr;
  int64_t dropped = 0;  // slices past the recorder's cap, noted in the trace's metadata
};

// {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}.
nlohmann::json chrome_trace_json(const std::vector<RankTrace>& ranks, const std::string& what);

}  // namespace gpuledger::report
