// ZeRO shard geometry of one parameter unit (Rajbhandari et al. 2020;
// docs/exact-budget.md "Model states"). A unit is one or two parts, each a
// contiguous range of its elements sharded over its own group:
//   - a unit without expert-sharded tensors is one part over the dp group;
//   - a MoE layer's unit under expert parallelism (ep > 1) begins with its
//     routed experts' matrices (TensorSlot::expert_sharded, param_layout.h):
//     that range is one part over the expert-data-parallel group (dp/ep
//     ranks holding the same experts), the rest of the unit one part over dp
//     — as Megatron-LM's distributed optimizer shards the expert parameters'
//     buffers over the expert-data-parallel group and the dense ones over dp
//     (megatron/core/distributed/distributed_data_parallel.py,
//     NVIDIA/Megatron-LM 001199898c4badd01eaf0785c212d8ed7ce83042: the
//     expert-parallel buffers built with expt_dp_group).
// A part of P elements over n ranks is padded to n·⌈P/n⌉; rank r owns its
// elements [r·S, (r+1)·S), S = ⌈P/n⌉ (the last ranks' shards may reach into
// the padding). The rank's shard buffer is its parts' shards back to back;
// the padded unit (a ZeRO 2 gradient staging buffer, a ZeRO 3 gathered
// copy) is the parts, each padded, back to back.
#pragma once
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "models/transformer/param_layout.h"

namespace gpuledger {

struct ShardPart {
  int64_t off = 0;          // the part's first element in the unit
  int64_t elems = 0;        // P: its elements
  int64_t n = 1;            // ranks of its group
  bool expert = false;      // over the expert-data-parallel group (else dp)
  int64_t shard_elems = 0;  // S = ⌈P/n⌉
  int64_t begin = 0;        // off + r·S: the rank's shard's first element in the unit
  int64_t valid = 0;        // elements of the shard inside the part
  int64_t shard_at = 0;     // the shard's first element in the rank's shard buffer
  int64_t padded_at = 0;    // the part's first element in the padded unit

  int64_t padded_elems() const { return n * shard_elems; }
};

struct UnitShard {
  int64_t unit_elems = 0;    // P_u
  int64_t shard_elems = 0;   // Σ S over the parts: what the sharded buffers hold
  int64_t padded_elems = 0;  // Σ n·S over the parts
  std::vector<ShardPart> parts;

  // Elements of the shard inside the unit (Σ valid).
  int64_t valid() const {
    int64_t v = 0;
    for (const ShardPart& p : parts) v += p.valid;
    return v;
  }
  // Unit element x's position in the padded unit.
  int64_t padded_offset(int64_t x) const {
    for (const ShardPart& p : parts)
      if (x >= p.off && x < p.off + p.elems) return p.padded_at + (x - p.off);
    return x;
  }
};

// The groups a unit's parts are sharded over: dp (n ranks, this one rank) and
// the expert-data-parallel group (expert_n ranks, this one expert_rank).
struct ShardGroups {
  int64_t n = 1, rank = 0;
  int64_t expert_n = 1, expert_rank = 0;
};

// Appends the part of `elems` elements at unit offset `off`, sharded over n
// ranks of which this is rank r, to s (its shard and padded places after the
// parts before it).
inline void append_shard_part(UnitShard& s, int64_t off, int64_t elems, int64_t n, int64_t r, bool expert) {
  ShardPart p;
  p.off = off;
  p.elems = elems;
  p.n = n;
  p.expert = expert;
  p.shard_elems = (elems + n - 1) / n;
  p.begin = off + r * p.shard_elems;
  p.valid = std::clamp<int64_t>(elems - r * p.shard_elems, 0, p.shard_elems);
  p.shard_at = s.shard_elems;
  p.padded_at = s.padded_elems;
  s.shard_elems += p.shard_elems;
  s.padded_elems += p.padded_elems();
  s.parts.push_back(p);
}

// One part of `elems` elements over n ranks (no expert-sharded tensors).
inline UnitShard unit_shard(int64_t elems, int64_t n, int64_t r) {
  UnitShard s;
  s.unit_elems = elems;
  append_shard_part(s, 0, elems, n, r, false);
  return s;
}

// The unit's parts: its expert-sharded tensors (a prefix of the unit) over
// the expert-data-parallel group, the rest over dp.
inline UnitShard unit_shard(const UnitLayout& u, const ShardGroups& g) {
  int64_t experts = 0;
  for (const TensorSlot& t : u.tensors) {
    if (!t.expert_sharded) continue;
    if (t.offset != experts)
      throw std::logic_error("unit_shard: the expert-sharded tensors of " + u.name + " are not its prefix");
    experts += t.elems();
  }
  if (experts == 0) return unit_shard(u.elems, g.n, g.rank);
  UnitShard s;
  s.unit_elems = u.elems;
  append_shard_part(s, 0, experts, g.expert_n, g.expert_rank, true);
  if (u.elems > experts) append_shard_part(s, experts, u.elems - experts, g.n, g.rank, false);
  return s;
}

}  // namespace gpuledger
