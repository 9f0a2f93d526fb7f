// The time of one collective from a network profile: the α–β (latency–
// bandwidth) model of a ring as NCCL's own tuner writes it, with the
// bandwidth term in nccl-tests' bus-bandwidth convention. docs/perf-model.md
// derives it; every formula of collective time is in collective_time.cpp.
//
//   t = α · steps + bytes · busbw_factor(kind, n) / β
//
// bytes: as the Comm counters book the call (comm/comm_bytes.h: all-reduce
// its buffer, reduce-scatter its input, all-gather its output, all-to-all its
// send buffer, send/recv the message) — the size nccl-tests reports, so that
// bytes · busbw_factor / t is exactly nccl-tests' busbw (doc/PERFORMANCE.md:
// busbw = algbw · factor, algbw = size / time) and β is a busbw figure.
// busbw_factor is core/collective.h's, the one definition.
//
// steps (the α term), from NCCL src/graph/tuning.cc, ncclTopoTuneModel (ring:
// nsteps = 2(n−1) for all-reduce, n−1 for reduce-scatter and all-gather):
//   all-reduce 2(n−1); reduce-scatter, all-gather n−1; all-to-all n−1 (one
//   exchange with each peer); broadcast n−1 (the depth of the pipelined
//   chain); send, recv 1. A group of one rank moves nothing: 0 s.
// Device–host copies are not network operations: op_time.h's host_copy_seconds.
#pragma once
#include <cstdint>

#include "core/collective.h"
#include "perf/network_profile.h"

namespace gpuledger::perf {

// The α-term's step count of a ring (above). Throws std::invalid_argument for
// a copy kind or n < 1.
int64_t ring_steps(CommKind kind, int64_t n);

// One link class for every step: α_link · ring_steps + bytes · factor / β_link.
double collective_seconds(const NetworkProfile& net, CommKind kind, int64_t bytes_as_booked, int64_t group_size,
                          LinkClass link);

enum class AllReduceAlgo { kRing, kTree };

// A group as it lies on the nodes (network_profile.h place_group):
//   α term (NCCL tuning.cc): ring — of its steps, the inter-node ones (2(N−1)
//     for all-reduce over N nodes, N−1 for the others) at α_inter and the rest
//     at α_intra; tree (all-reduce only) — 2·((n/N − 1)·α_intra + ⌊log2 N⌋·α_inter),
//     a chain inside each node and a binary tree across nodes, NCCL's
//     log2i (floor) as written there;
//   β: intra-node groups β_intra; an inter-node group with k members on each
//     node drives k NICs at once (one NCCL ring per NIC), so its bus
//     bandwidth is min(β_intra, k · β_inter) — the slower class governs.
//     This is the ring's bound; NCCL's hierarchical algorithms (tree, NVLS,
//     CollNet) can beat it for k > 1, so it errs slow there.
// A measured profile whose samples (network_profile.h) hold the kind (a recv
// as its send) over a group of g.size within one node, on a profile of one
// node (intra-node link only), prices by them instead: linear in bytes between
// neighbouring samples, the smallest's time below them, the last two's slope
// beyond (docs/perf-model.md "Collective time").
// algo kTree with a kind other than all-reduce throws std::invalid_argument.
double group_collective_seconds(const NetworkProfile& net, CommKind kind, int64_t bytes_as_booked,
                                const GroupPlacement& g, AllReduceAlgo algo = AllReduceAlgo::kRing);

// The bus bandwidth a placed group runs at (the β rule above).
double group_busbw_bytes_per_s(const NetworkProfile& net, const GroupPlacement& g);

}  // namespace gpuledger::perf
