// Trace slices: what ran on which stream of a rank, when and for how long —
// the measured side of a timeline that opens in Perfetto or chrome://tracing
// (bench/report/trace_json.h writes the Chrome trace-event format). A rank's
// ops are timed by ProfilingDevice (kernels/profiling_device.h) on the stream
// "compute"; its collectives by the Comm counters (comm/comm.h) on the stream
// "comm <group>", with the seconds the caller was exposed to (a started
// collective: the time spent in its start and its wait, comm/comm.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gpuledger {

struct TraceSlice {
  std::string stream;   // "compute", "comm tp", "comm pp", …
  std::string name;     // the op ("gemm") or the collective ("all_reduce")
  double start_us = 0;  // microseconds of the wall clock (system_clock, comparable across hosts kept in sync)
  double dur_us = 0;
  int64_t flops = 0;  // the op's FLOPs as the device counted them
  int64_t bytes = 0;  // a collective's bytes as booked (comm/comm_bytes.h)
  bool operator==(const TraceSlice&) const = default;
};

// Collects one rank's slices, up to `max_slices` (then counts the ones it
// drops, so that a long run cannot exhaust the host's memory).
class TraceRecorder {
 public:
  explicit TraceRecorder(int64_t max_slices = 2'000'000) : max_slices_(max_slices) {}
  static double now_us();  // the wall clock, microseconds since the epoch
  void add(TraceSlice s);
  const std::vector<TraceSlice>& slices() const { return slices_; }
  int64_t dropped() const { return dropped_; }

 private:
  int64_t max_slices_;
  int64_t dropped_ = 0;
  std::vector<TraceSlice> slices_;
};

}  // namespace gpuledger
