// ZeRO shard geometry of one parameter unit over the data-parallel group
// (Rajbhandari et al. 2020; docs/exact-budget.md "Model states"): a unit of
// P_u elements is padded to n·⌈P_u/n⌉ and rank r of the n ranks owns elements
// [r·S_u, (r+1)·S_u), S_u = ⌈P_u/n⌉. The last ranks' shards may reach past
// P_u (padding, never updated) or lie wholly in the padding.
#pragma once
#include <algorithm>
#include <cstdint>

namespace gpuledger {

struct UnitShard {
  int64_t unit_elems = 0;   // P_u
  int64_t shard_elems = 0;  // S_u = ⌈P_u/n⌉ (what the sharded buffers hold)
  int64_t begin = 0;        // r·S_u: the shard's first element in the unit
  int64_t valid = 0;        // elements of the shard inside [0, P_u)

  int64_t padded_elems(int64_t n) const { return n * shard_elems; }
  // The part of [lo, hi) (unit elements) inside this shard's valid range,
  // as [first, last) unit elements (first >= last when empty).
  int64_t clip_lo(int64_t lo) const { return std::max(lo, begin); }
  int64_t clip_hi(int64_t hi) const { return std::min(hi, begin + valid); }
};

inline UnitShard unit_shard(int64_t unit_elems, int64_t n, int64_t r) {
  UnitShard s;
  s.unit_elems = unit_elems;
  s.shard_elems = (unit_elems + n - 1) / n;
  s.begin = r * s.shard_elems;
  s.valid = std::clamp<int64_t>(unit_elems - s.begin, 0, s.shard_elems);
  return s;
}

}  // namespace gpuledger
