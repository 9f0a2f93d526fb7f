// The one home of what a collective is, over which group, how many ranks that
// group has in a layout, and how nccl-tests turns its algorithm bandwidth into
// bus bandwidth. The Comm counters (comm/), the analytic communication budget
// (analytic/comm_volume.h), the report's JSON and tables (bench/report/) and
// the communication microbenchmark all read these; none keeps its own copy.
//
// Counters and reports name a call "<kind>@<group>" (e.g. "all_reduce@dp");
// comm_key_name / parse_comm_key convert between that name and the typed key.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/layout.h"

namespace gpuledger {

// kCopyToHost / kCopyToDevice: no collective, a rank's copy between its device
// and host memory (ZeRO-Offload, parallel/zero/optimizer_offload.h), counted
// beside the collectives under the group kHost.
enum class CommKind {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kAllToAll,
  kBroadcast,
  kSend,
  kRecv,
  kCopyToHost,
  kCopyToDevice
};

// The groups a rank communicates over (parallel/groups.h builds them):
//   kTp   tensor-parallel group (tp ranks);
//   kDp   data-parallel group with context parallelism: the dp·cp ranks that
//         hold the same parameters (Megatron's data_parallel_group_with_cp;
//         the dp group when cp = 1);
//   kCp   the context-parallel ring (cp ranks);
//   kPp   the pipeline (pp ranks; its calls are point-to-point);
//   kEmb  the tied embedding's first and last stage (2 ranks);
//   kEp   the expert-parallel group (ep ranks);
//   kEdp  the expert-data-parallel group: the dp/ep ranks holding the same experts;
//   kHost no group: a rank's copies between device and host.
enum class CommGroup { kTp, kDp, kCp, kPp, kEmb, kEp, kEdp, kHost };

std::string_view comm_kind_name(CommKind k);    // "all_reduce", "reduce_scatter", …, "copy_d2h", "copy_h2d"
std::string_view comm_group_name(CommGroup g);  // "tp", "dp", "cp", "pp", "emb", "ep", "edp", "host"
std::optional<CommKind> parse_comm_kind(std::string_view name);
std::optional<CommGroup> parse_comm_group(std::string_view name);

// Ranks in group g under layout l (kHost: 1, a copy involves one rank).
int64_t comm_group_size(CommGroup g, const Layout& l);

// nccl-tests' bus-bandwidth factor (doc/PERFORMANCE.md, "Summary"): busbw =
// algbw × factor, so that a collective's busbw is comparable with the link's
// speed whatever the group size n: all-reduce 2(n−1)/n; reduce-scatter,
// all-gather and all-to-all (n−1)/n; broadcast, send and recv 1; a device–host
// copy 1 (one link). A group of one rank moves nothing: its collectives' factor
// is the formula's 0. Throws std::invalid_argument when n < 1.
double busbw_factor(CommKind kind, int64_t n);

struct CommKey {
  CommKind kind = CommKind::kAllReduce;
  CommGroup group = CommGroup::kDp;
  bool operator==(const CommKey&) const = default;
};
std::string comm_key_name(CommKey key);  // "all_reduce@dp"
// "<kind>@<group>" -> the key; nullopt when either part is not a known name.
std::optional<CommKey> parse_comm_key(std::string_view name);

}  // namespace gpuledger
