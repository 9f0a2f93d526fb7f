// NetworkProfile: the links between ranks — the typed form collective times are
// computed with (perf/collective_time.h); JSON at the edge (perf/profile_json.h,
// schema gpuledger.network_profile/1, docs/perf-model.md) — and where a
// layout's groups fall on the nodes.
//
// Node mapping. Ranks are placed on nodes in world-rank order, ranks_per_node
// to a node: rank r is on node ⌊r / ranks_per_node⌋ (what mpirun's default
// --map-by slot and Slurm's block distribution do). World ranks follow the
// layout's Megatron order (core/layout.h: tp fastest, then cp, then dp, then
// pp), so with tp = ranks_per_node every tp group is one node. A group's
// members come from Layout's own group functions (tp_group, cp_group,
// dp_cp_group, pp_group, ep_group, expert_dp_group), never re-derived here.
// A group is intra-node iff all its members are on one node; otherwise it is
// inter-node, and the slower link class governs it (collective_time.h).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/collective.h"
#include "core/layout.h"
#include "perf/sourced.h"

namespace gpuledger::perf {

enum class LinkClass { kIntraNode, kInterNode };
std::string_view link_class_name(LinkClass c);  // "intra_node", "inter_node"

// One link class: what it is, its per-step latency α and its bandwidth β as
// nccl-tests' bus bandwidth (the figure busbw_factor normalises to).
struct LinkFigures {
  std::string kind;           // "nvlink4-nvswitch", "infiniband-ndr-400g-per-gpu", "shared-memory"
  Sourced latency_seconds;    // α: one step of a ring
  Sourced busbw_bytes_per_s;  // β: per rank; inter-node: one rank's NIC
  bool operator==(const LinkFigures&) const = default;
};

// A measured collective, as calibrate timed it (kept so that a profile can be re-fitted).
struct CollectiveSample {
  CommKind kind = CommKind::kAllReduce;
  int64_t group_size = 0;
  int64_t bytes = 0;  // as booked (comm/comm_bytes.h)
  double seconds = 0;
  bool operator==(const CollectiveSample&) const = default;
};

struct NetworkProfile {
  std::string name;
  nlohmann::json fingerprint = nlohmann::json::object();
  Provenance provenance;
  Sourced ranks_per_node;                 // an integer ≥ 1, kept with its source
  std::optional<LinkFigures> intra_node;  // absent: not measured (e.g. one rank per node)
  std::optional<LinkFigures> inter_node;  // absent: not measured (e.g. one node)
  std::vector<CollectiveSample> samples;  // measured profiles only
  bool operator==(const NetworkProfile& o) const = default;

  int64_t ranks_per_node_count() const { return static_cast<int64_t>(ranks_per_node.value); }
  // The figures of a link class; throws std::invalid_argument naming it when the profile lacks it.
  const LinkFigures& link(LinkClass c) const;
};

// Throws std::invalid_argument naming the first problem: no name or
// provenance, ranks_per_node not an integer ≥ 1, a link figure without a
// source or not positive and finite (a latency may be 0), no link at all.
void validate_network_profile(const NetworkProfile& p);

// ---- where a group falls on the nodes ----

int64_t node_of(int64_t rank, int64_t ranks_per_node);

// The world ranks of `rank`'s group g under layout l, from Layout's group
// functions: tp → tp_group, cp → cp_group, dp → dp_cp_group (the dp·cp ranks
// gradients are summed over, core/collective.h), pp → pp_group, emb → the
// first and last rank of pp_group (the tied embedding's two stages), ep →
// ep_group, edp → expert_dp_group, host → {rank}.
std::vector<int64_t> group_members(CommGroup g, const Layout& l, int64_t rank);

struct GroupPlacement {
  int64_t size = 0;   // members
  int64_t nodes = 0;  // distinct nodes they are on
  // The fewest members on any one of those nodes: how many of a node's NICs
  // the group drives at once (NCCL runs one ring per NIC on rail-matched GPUs).
  int64_t min_ranks_per_node = 0;
  LinkClass link = LinkClass::kIntraNode;  // kIntraNode iff nodes == 1
  bool operator==(const GroupPlacement&) const = default;
};
GroupPlacement place_members(const std::vector<int64_t>& members, int64_t ranks_per_node);
GroupPlacement place_group(CommGroup g, const Layout& l, int64_t rank, int64_t ranks_per_node);

}  // namespace gpuledger::perf
