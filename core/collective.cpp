// Collective kinds, groups, group sizes and bus-bandwidth factors (see collective.h).
#include "core/collective.h"

#include <stdexcept>
#include <string>

#include "core/name_table.h"

namespace gpuledger {
namespace {

constexpr NameTable<CommKind, 9> kKindNames{{
    {CommKind::kAllReduce, "all_reduce"},
    {CommKind::kReduceScatter, "reduce_scatter"},
    {CommKind::kAllGather, "all_gather"},
    {CommKind::kAllToAll, "all_to_all"},
    {CommKind::kBroadcast, "broadcast"},
    {CommKind::kSend, "send"},
    {CommKind::kRecv, "recv"},
    {CommKind::kCopyToHost, "copy_d2h"},
    {CommKind::kCopyToDevice, "copy_h2d"},
}};

constexpr NameTable<CommGroup, 8> kGroupNames{{
    {CommGroup::kTp, "tp"},
    {CommGroup::kDp, "dp"},
    {CommGroup::kCp, "cp"},
    {CommGroup::kPp, "pp"},
    {CommGroup::kEmb, "emb"},
    {CommGroup::kEp, "ep"},
    {CommGroup::kEdp, "edp"},
    {CommGroup::kHost, "host"},
}};

}  // namespace

std::string_view comm_kind_name(CommKind k) { return name_in(kKindNames, k); }
std::string_view comm_group_name(CommGroup g) { return name_in(kGroupNames, g); }
std::optional<CommKind> parse_comm_kind(std::string_view name) { return value_in(kKindNames, name); }
std::optional<CommGroup> parse_comm_group(std::string_view name) { return value_in(kGroupNames, name); }

int64_t comm_group_size(CommGroup g, const Layout& l) {
  switch (g) {
    case CommGroup::kTp: return l.tp;
    case CommGroup::kDp: return l.dp_cp();
    case CommGroup::kCp: return l.cp;
    case CommGroup::kPp: return l.pp;
    case CommGroup::kEmb: return 2;
    case CommGroup::kEp: return l.ep;
    case CommGroup::kEdp: return l.dp / l.ep;
    case CommGroup::kHost: return 1;
  }
  throw std::logic_error("comm_group_size: unknown group");
}

double busbw_factor(CommKind kind, int64_t n) {
  if (n < 1) throw std::invalid_argument("busbw_factor: group size " + std::to_string(n) + " < 1");
  const double d = static_cast<double>(n);
  switch (kind) {
    case CommKind::kAllReduce: return 2.0 * (d - 1.0) / d;
    case CommKind::kReduceScatter:
    case CommKind::kAllGather:
    case CommKind::kAllToAll: return (d - 1.0) / d;
    case CommKind::kBroadcast:
    case CommKind::kSend:
    case CommKind::kRecv:
    case CommKind::kCopyToHost:
    case CommKind::kCopyToDevice: return 1.0;
  }
  throw std::logic_error("busbw_factor: unknown collective");
}

std::string comm_key_name(CommKey key) {
  return std::string(comm_kind_name(key.kind)) + "@" + std::string(comm_group_name(key.group));
}

std::optional<CommKey> parse_comm_key(std::string_view name) {
  const auto at = name.find('@');
  if (at == std::string_view::npos) return std::nullopt;
  const auto kind = parse_comm_kind(name.substr(0, at));
  const auto group = parse_comm_group(name.substr(at + 1));
  if (!kind || !group) return std::nullopt;
  return CommKey{*kind, *group};
}

}  // namespace gpuledger
