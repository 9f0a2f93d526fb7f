// Link-class names, the network profile's checks, and group placement on nodes (see network_profile.h).
#include "perf/network_profile.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

namespace gpuledger::perf {
namespace {

void check_link(const LinkFigures& f, const std::string& what) {
  if (f.kind.empty()) throw std::invalid_argument(what + ".kind: empty");
  if (f.latency_seconds.source.empty()) throw std::invalid_argument(what + ".latency_seconds: no source");
  if (!std::isfinite(f.latency_seconds.value) || f.latency_seconds.value < 0)
    throw std::invalid_argument(what + ".latency_seconds: not ≥ 0 and finite");
  if (f.busbw_bytes_per_s.source.empty()) throw std::invalid_argument(what + ".busbw_bytes_per_s: no source");
  if (!std::isfinite(f.busbw_bytes_per_s.value) || f.busbw_bytes_per_s.value <= 0)
    throw std::invalid_argument(what + ".busbw_bytes_per_s: not positive and finite");
}

}  // namespace

std::string_view link_class_name(LinkClass c) { return c == LinkClass::kIntraNode ? "intra_node" : "inter_node"; }

const LinkFigures& NetworkProfile::link(LinkClass c) const {
  const auto& l = c == LinkClass::kIntraNode ? intra_node : inter_node;
  if (!l)
    throw std::invalid_argument("network profile " + name + " has no " + std::string(link_class_name(c)) +
                                " link (not measured: calibrate on more ranks or nodes, or use a published profile)");
  return *l;
}

void validate_network_profile(const NetworkProfile& p) {
  if (p.name.empty()) throw std::invalid_argument("network profile: no name");
  const std::string at = "network profile " + p.name + ": ";
  if (p.provenance.kind != kMeasured && p.provenance.kind != kPublished)
    throw std::invalid_argument(at + "provenance must be \"" + kMeasured + "\" or \"" + kPublished + "\"");
  const double r = p.ranks_per_node.value;
  if (p.ranks_per_node.source.empty()) throw std::invalid_argument(at + "ranks_per_node: no source");
  if (!(r >= 1) || r != std::floor(r) || r > 1e6)
    throw std::invalid_argument(at + "ranks_per_node: not an integer ≥ 1");
  if (!p.intra_node && !p.inter_node) throw std::invalid_argument(at + "no link class");
  if (p.intra_node) check_link(*p.intra_node, at + "links.intra_node");
  if (p.inter_node) check_link(*p.inter_node, at + "links.inter_node");
}

int64_t node_of(int64_t rank, int64_t ranks_per_node) {
  if (ranks_per_node < 1) throw std::invalid_argument("node_of: ranks_per_node < 1");
  return rank / ranks_per_node;
}

std::vector<int64_t> group_members(CommGroup g, const Layout& l, int64_t rank) {
  switch (g) {
    case CommGroup::kTp: return l.tp_group(rank);
    case CommGroup::kCp: return l.cp_group(rank);
    case CommGroup::kDp: return l.dp_cp_group(rank);
    case CommGroup::kPp: return l.pp_group(rank);
    case CommGroup::kEmb: {
      const auto pp = l.pp_group(rank);
      return {pp.front(), pp.back()};
    }
    case CommGroup::kEp: return l.ep_group(rank);
    case CommGroup::kEdp: return l.expert_dp_group(rank);
    case CommGroup::kHost: return {rank};
  }
  throw std::logic_error("group_members: unknown group");
}

GroupPlacement place_members(const std::vector<int64_t>& members, int64_t ranks_per_node) {
  if (members.empty()) throw std::invalid_argument("place_members: an empty group");
  std::map<int64_t, int64_t> per_node;
  for (int64_t r : members) ++per_node[node_of(r, ranks_per_node)];
  GroupPlacement p;
  p.size = static_cast<int64_t>(members.size());
  p.nodes = static_cast<int64_t>(per_node.size());
  p.min_ranks_per_node = p.size;
  for (const auto& [node, count] : per_node) p.min_ranks_per_node = std::min(p.min_ranks_per_node, count);
  p.link = p.nodes == 1 ? LinkClass::kIntraNode : LinkClass::kInterNode;
  return p;
}

GroupPlacement place_group(CommGroup g, const Layout& l, int64_t rank, int64_t ranks_per_node) {
  return place_members(group_members(g, l, rank), ranks_per_node);
}

}  // namespace gpuledger::perf
