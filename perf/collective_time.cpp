// Collective time: the α–β ring model with NCCL's step counts and nccl-tests'
// busbw convention (see collective_time.h and docs/perf-model.md).
#include "perf/collective_time.h"

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace gpuledger::perf {
namespace {

void check_bytes(int64_t bytes) {
  if (bytes < 0) throw std::invalid_argument("collective time: bytes < 0 (" + std::to_string(bytes) + ")");
}

// NCCL's nInterSteps (tuning.cc): the ring crosses each node boundary once
// per pass; all-reduce makes two passes (reduce-scatter, then all-gather).
int64_t inter_node_steps(CommKind kind, int64_t nodes) {
  if (nodes <= 1) return 0;
  switch (kind) {
    case CommKind::kAllReduce: return 2 * (nodes - 1);
    case CommKind::kSend:
    case CommKind::kRecv: return 1;
    default: return nodes - 1;
  }
}

// The measured samples of `kind` over `size` ranks, ascending in bytes.
std::vector<std::pair<double, double>> samples_of(const NetworkProfile& net, CommKind kind, int64_t size) {
  std::vector<std::pair<double, double>> v;
  for (const auto& s : net.samples)
    if (s.kind == kind && s.group_size == size) v.emplace_back(static_cast<double>(s.bytes), s.seconds);
  std::sort(v.begin(), v.end());
  return v;
}

// Linear in bytes between the neighbouring samples (a collective's time is
// affine in its bytes), the smallest sample's time below them, the last two
// samples' slope beyond them.
double from_samples(const std::vector<std::pair<double, double>>& v, double bytes) {
  if (bytes <= v.front().first || v.size() == 1) return v.front().second;
  size_t i = 1;
  while (i + 1 < v.size() && v[i].first < bytes) ++i;
  const auto& [b0, t0] = v[i - 1];
  const auto& [b1, t1] = v[i];
  return std::max(t0 + (bytes - b0) * (t1 - t0) / (b1 - b0), 0.0);
}

}  // namespace

int64_t ring_steps(CommKind kind, int64_t n) {
  if (n < 1) throw std::invalid_argument("ring_steps: group size " + std::to_string(n) + " < 1");
  switch (kind) {
    case CommKind::kAllReduce: return 2 * (n - 1);
    case CommKind::kReduceScatter:
    case CommKind::kAllGather:
    case CommKind::kAllToAll:
    case CommKind::kBroadcast: return n - 1;
    case CommKind::kSend:
    case CommKind::kRecv: return n > 1 ? 1 : 0;
    case CommKind::kCopyToHost:
    case CommKind::kCopyToDevice: break;
  }
  throw std::invalid_argument("ring_steps: " + std::string(comm_kind_name(kind)) +
                              " is a device–host copy, not a collective (op_time.h host_copy_seconds)");
}

double collective_seconds(const NetworkProfile& net, CommKind kind, int64_t bytes_as_booked, int64_t group_size,
                          LinkClass link) {
  check_bytes(bytes_as_booked);
  const int64_t steps = ring_steps(kind, group_size);
  if (steps == 0) return 0.0;
  const LinkFigures& f = net.link(link);
  return f.latency_seconds.value * static_cast<double>(steps) +
         static_cast<double>(bytes_as_booked) * busbw_factor(kind, group_size) / f.busbw_bytes_per_s.value;
}

double group_busbw_bytes_per_s(const NetworkProfile& net, const GroupPlacement& g) {
  if (g.link == LinkClass::kIntraNode) return net.link(LinkClass::kIntraNode).busbw_bytes_per_s.value;
  const double nics =
      static_cast<double>(g.min_ranks_per_node) * net.link(LinkClass::kInterNode).busbw_bytes_per_s.value;
  // A group with one member per node never touches the intra-node link.
  if (g.min_ranks_per_node <= 1 && g.size == g.nodes) return nics;
  return std::min(net.link(LinkClass::kIntraNode).busbw_bytes_per_s.value, nics);
}

double group_collective_seconds(const NetworkProfile& net, CommKind kind, int64_t bytes_as_booked,
                                const GroupPlacement& g, AllReduceAlgo algo) {
  check_bytes(bytes_as_booked);
  if (algo == AllReduceAlgo::kTree && kind != CommKind::kAllReduce)
    throw std::invalid_argument("group_collective_seconds: the tree is an all-reduce algorithm, not " +
                                std::string(comm_kind_name(kind)) + "'s");
  const int64_t steps = ring_steps(kind, g.size);
  if (steps == 0) return 0.0;
  // A measured profile's own samples of this collective over a group of this
  // size within one node price it as measured: a CPU's MPI collectives are far
  // from one α and β (their reductions compute; large messages leave the caches).
  if (g.nodes == 1 && net.intra_node && !net.inter_node) {
    const auto v = samples_of(net, kind == CommKind::kRecv ? CommKind::kSend : kind, g.size);
    if (v.size() >= 2) return from_samples(v, static_cast<double>(bytes_as_booked));
  }
  const double bandwidth_s =
      static_cast<double>(bytes_as_booked) * busbw_factor(kind, g.size) / group_busbw_bytes_per_s(net, g);
  const bool spans = g.link == LinkClass::kInterNode;
  // Members per node beyond the first: the intra-node hops (none when every member has a node to itself).
  const bool has_intra_hops = !spans || g.size > g.nodes;
  const double a_intra = has_intra_hops ? net.link(LinkClass::kIntraNode).latency_seconds.value : 0.0;
  const double a_inter = spans ? net.link(LinkClass::kInterNode).latency_seconds.value : 0.0;
  double latency_s = 0;
  if (algo == AllReduceAlgo::kTree) {
    const auto nodes = static_cast<uint64_t>(g.nodes);
    const int64_t log2_nodes = static_cast<int64_t>(std::bit_width(nodes)) - 1;  // NCCL's log2i: ⌊log2 N⌋
    latency_s = 2.0 * (static_cast<double>(g.size / g.nodes - 1) * a_intra + static_cast<double>(log2_nodes) * a_inter);
  } else {
    const int64_t inter = spans ? std::min(steps, inter_node_steps(kind, g.nodes)) : 0;
    latency_s = static_cast<double>(steps - inter) * a_intra + static_cast<double>(inter) * a_inter;
  }
  return latency_s + bandwidth_s;
}

}  // namespace gpuledger::perf
