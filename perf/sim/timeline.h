// The step simulator's core: each simulated rank is a program — the ops and
// collectives its step issues, in order, each with a duration already costed
// (perf/ prices them from the device and network profiles) — and the
// simulator lays them on per-stream clocks, following what the real code
// overlaps and what it waits for:
//   - compute ops run one after another on the rank's stream "compute";
//   - a blocking collective (TP's all-reduces, the loss's) holds the compute
//     stream: it starts when every member has reached it (the slowest member
//     sets the start) and its stream is free, and compute resumes when it ends;
//   - a started collective (the bucketed DP reduce-scatter / all-reduce, ZeRO's
//     gathers) runs on its group's stream beside the compute that follows, from
//     when every member has started it; a wait makes the compute stream wait
//     for its end — only the part not hidden behind compute is exposed;
//   - a pipeline send runs on the sender's "comm pp" stream from when its data
//     is ready (the sender's compute goes on); the matching recv makes the
//     receiver's compute wait until the transfer has ended — the bubble comes
//     out of the schedule the programs follow, not out of a formula.
// Members of a collective are the simulated ranks whose programs name the same
// group instance (`channel`); its n-th call on each matches. A group member
// that is not simulated is taken to behave as the simulated ones do (the
// layout's rank roles: ranks of one pipeline stage run the same program).
// A send and a recv match by channel and order: the n-th send on "pp 0>1:fwd"
// is the n-th recv there.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/trace.h"

namespace gpuledger::perf {

// The stream a group's collectives run on: "comm tp", "comm dp", … (the group
// as core/collective.h comm_group_name writes it; the report reads it back:
// bench/report/prediction_json.h stream_group).
inline std::string comm_stream(std::string_view group) { return "comm " + std::string(group); }

enum class SimEventKind {
  kCompute,          // an op on the compute stream
  kCollective,       // a blocking collective
  kCollectiveStart,  // a started collective (its `handle` is waited for later)
  kCollectiveWait,   // the compute stream waits for `handle`'s end
  kSend,             // a point-to-point send on `channel`
  kRecv,             // the matching receive
};

struct SimEvent {
  SimEventKind kind = SimEventKind::kCompute;
  std::string name;     // "gemm", "all_reduce", "send", … (the trace slice's name)
  double seconds = 0;   // the op's or the transfer's duration; none for a wait or a recv
  std::string stream;   // collectives and sends: their stream ("comm tp", "comm dp", "comm pp")
  std::string channel;  // collectives: the group instance; sends and recvs: the pipe ("pp 0>1:fwd")
  int64_t handle = -1;  // kCollectiveStart / kCollectiveWait: which start a wait is for
  int64_t flops = 0;    // for the trace
  int64_t bytes = 0;
};

struct SimRank {
  int64_t rank = 0;
  std::string role;  // "r0 pp0 first"
  std::vector<SimEvent> program;
};

struct SimRankTimes {
  int64_t rank = 0;
  double step_seconds = 0;     // from 0 to the end of the rank's last event on any stream
  double compute_seconds = 0;  // the compute stream busy with ops
  // The compute stream waiting for a collective's transfer that was not hidden
  // behind compute, per stream ("comm tp", "comm dp", …).
  std::map<std::string, double> exposed_comm_seconds;
  // The compute stream waiting for other ranks: for a collective's slowest
  // member, or for a pipeline recv (the bubble on a pipeline stage).
  double wait_seconds = 0;
  // What is left of the step: the compute stream idle after its last event
  // while another stream finishes (a DP collective that outlasts the backward).
  double tail_seconds = 0;
  std::vector<TraceSlice> slices;  // start_us from the step's start
};

struct SimResult {
  std::vector<SimRankTimes> ranks;  // in the order given
  double step_seconds = 0;          // the slowest rank's
};

// Throws std::invalid_argument on a malformed program (a wait for a handle
// never started, a recv whose channel no simulated rank sends on, a negative
// duration) and std::runtime_error when the programs wait on each other in a
// cycle (a deadlock: no rank can go on).
SimResult simulate_step(const std::vector<SimRank>& ranks);

}  // namespace gpuledger::perf
