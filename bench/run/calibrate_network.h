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

#include "perf/network_profile.h"

namespace gpuledger::bench {

struct NetworkCalibration {
  // Bytes as booked (comm/comm_bytes.h) at each point; rounded down to whole
  // fp32 elements per rank.
  std::vector<int64_t> sizes = {8 << 10, 64 << 10, 512 << 10, 4 << 20, 32 << 20};
  int warmup = 2, reps = 5;
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
// then `rank0_work` (the device measurement) runs on rank 0 while the other
// ranks wait in a polled barrier that sleeps between polls, so that they do
// not spin on the cores rank 0 is measuring. Built without MPI it throws.
MpiCalibration calibrate_under_mpi(const NetworkCalibration& c, const std::function<void()>& rank0_work,
                                   std::ostream& progress);

}  // namespace gpuledger::bench
