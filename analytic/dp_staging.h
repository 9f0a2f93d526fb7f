// Data-parallel gradient reduction sizes shared by the communication budget
// (comm_volume.cpp) and the memory budget (budget.cpp, account comm):
// docs/exact-budget.md "Communication staging", docs/formulas/comm.md.
#pragma once
#include <cstdint>
#include <vector>

#include "analytic/params.h"

namespace gpuledger::analytic {

// Elements per DP bucket: ⌊bucket_mb·2²⁰ / grad_bytes⌋ (Megatron's bucket
// size, PyTorch DDP's bucket_cap_mb). Throws std::invalid_argument when that is
// < 1 (a --bucket-mb that holds no gradient element).
int64_t dp_bucket_elems(double bucket_mb, int64_t grad_bytes);

// ZeRO 1: shard elements one reduce-scatter piece covers, max(1, ⌊bucket / n⌋):
// a piece gathers those elements of all n ranks' shards, n·piece ≤ bucket
// elements (or n when the bucket is smaller than n).
int64_t zero1_piece_elems(int64_t bucket_elems, int64_t n);

// fp32 staging bytes of the ZeRO 0/1 gradient reduction over n > 1 ranks for a
// rank holding `units` (slots: 2 when the reduction overlaps the backward, else 1):
//   ZeRO 0: 4·min(slots·bucket, P_r)            (buckets span units)
//   ZeRO 1: 4·slots·n·min(piece, max_u ⌈P_u/n⌉)  (pieces of one unit's shards)
int64_t dp_reduce_staging_bytes(const std::vector<ParamUnit>& units, int64_t zero, int64_t n, int64_t bucket_elems,
                                bool overlap);
// The same over ranges of the given element counts, each reduced (ZeRO 1:
// sharded) as a unit is: with ep > 1 the dense and the expert-sharded part of
// each unit, over their own groups (parallel/dp/grad_sync.h).
int64_t dp_reduce_staging_bytes(const std::vector<int64_t>& elems, int64_t zero, int64_t n, int64_t bucket_elems,
                                bool overlap);

}  // namespace gpuledger::analytic
