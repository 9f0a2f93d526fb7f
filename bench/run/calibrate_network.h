// Measuring the network of an MPI job for a NetworkProfile (perf/
// network_profile.h): all-reduce, all-gather, reduce-scatter over the world
// and send/recv between rank pairs (0↔1, 2↔3, …), at a few sizes, through
// MpiComm — the communicator CPU runs use. Each point: fixed warm-up and
// timed repetitions on every rank (never adaptive: ranks must issue the same
// calls), each repetition's time the slowest rank's, the median kept. α and
// β are then fitted to every sample at once (perf/alpha_beta_fit.h).
//
// Where the figures go: on one host the world is intra-node, so they are the
// intra-node link; across hosts the world is inter-node with k ranks on each
// host, and its busbw is k NICs' (perf/collective_time.h), so β_inter is the
// fitted busbw over k.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "perf/network_profile.h"

namespace gpuledger::bench {

struct NetworkCalibration {
  // Bytes as booked (comm/comm_bytes.h) at each point; rounded down to whole
  // elements per rank.
  std::vector<int64_t> sizes = {8 << 10, 64 << 10, 512 << 10, 2 << 20, 4 << 20, 8 << 20, 16 << 20, 32 << 20};
  int warmup = 2, reps = 5;
  // The elements' dtype, the runs': MpiComm reduces 16-bit values through fp32
  // staging (comm/mpi_comm.h), so a bf16 all-reduce of b booked bytes moves 2b
  // and converts twice — not the time of an fp32 one of b bytes.
  DType dtype = DType::kFP32;
  std::string name, command;
};
NetworkCalibration quick_network_calibration();

struct MpiCalibration {
  bool is_rank0 = true;
  int64_t world_size = 1;
  std::optional<perf::NetworkProfile> network;  // rank 0 with more than one rank
};

// Collective over MPI_COMM_WORLD (every rank calls it; MPI is started and
// finished inside). With more than one rank the network is measured first;
// then `device_work(is_rank0)` (the device measurement) runs on every rank at
// once, as the ranks of a run compute at once: ranks that share a host share
// its memory system, caches and clock, and a device measured alone beside idle
// cores runs faster than each rank of the run does. Rank 0's figures are the
// profile's. The ranks then meet in a polled barrier that sleeps between
// polls. Built without MPI it throws.
MpiCalibration calibrate_under_mpi(const NetworkCalibration& c, const std::function<void(bool)>& device_work,
                                   std::ostream& progress);

}  // namespace gpuledger::bench
