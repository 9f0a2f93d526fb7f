// One collective at one size, nccl-tests style: warm-up iterations, timed
// iterations (each rank times its call; the iteration's time is the max over
// ranks), then one data check on fresh inputs (wrong elements summed over
// ranks). Counters: algbw and busbw (bytes/s; busbw = algbw × nccl-tests'
// factor, core/collective.h busbw_factor), bytes (the size as nccl-tests counts it,
// comm_call_bytes), wrong.
#pragma once
#include <benchmark/benchmark.h>
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>

#include "comm/comm.h"
#include "kernels/device.h"
#include "kernels/ledger.h"

namespace gpuledger::micro {

enum class Collective { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kSendRecv };
const char* collective_name(Collective c);  // "all_reduce", …, "send_recv"
bool collective_from_name(const std::string& name, Collective* c);
// Whether the Comm interface has the placement: all_reduce and broadcast are
// in place only (one buffer), send/recv out of place only.
bool has_placement(Collective c, bool in_place);

// A comm backend over MPI_COMM_WORLD and the Device its buffers live on.
struct CommRig {
  std::string backend;  // "mpi" (host buffers) or "nccl" (GPU buffers)
  Ledger ledger;
  std::unique_ptr<Device> dev;
  CommCounters counters;
  std::unique_ptr<Comm> comm;
};

// Collective over MPI_COMM_WORLD: every rank gets the rig, or every rank gets
// nullptr with `why` (a backend missing on any rank is missing on all, so
// that no rank registers benchmarks its peers skip).
std::unique_ptr<CommRig> make_comm_rig(const std::string& backend, std::string* why);

struct SweepPoint {
  Collective kind;
  DType t;
  bool in_place;
  int64_t warmup_iters;
};

// The benchmark body; st.range(0) is the size in bytes.
void run_collective(benchmark::State& st, CommRig& rig, const SweepPoint& p);

// Wrong elements over every data check so far (the same on every rank).
int64_t total_wrong();

}  // namespace gpuledger::micro
