// Data-parallel gradient reduction in buckets, overlapped with the backward
// (Megatron's DistributedDataParallel grad buffer with --overlap-grad-reduce,
// PyTorch DDP's bucket_cap_mb), as a plan of collectives over staging slots:
//
//   ZeRO 0 — all_reduce_plan: the rank's units laid back to back and cut into
//     buckets of ⌊bucket_mb·2²⁰ / g⌋ elements; each bucket is one all-reduce
//     over dp (docs/formulas/comm.md: ⌈P_r / bucket⌉ calls, P_r·g bytes). A
//     bucket may span units: its pieces are copied into a contiguous staging
//     slot, reduced there in the gradient dtype and copied back.
//   ZeRO 1 — reduce_scatter_plan: each unit's gradient summed into the
//     rank's shard, elements [r·S_u, r·S_u + valid) with S_u = ⌈P_u/n⌉
//     (models/transformer/unit_shard.h), in pieces of c = max(1, ⌊bucket/n⌋) shard
//     elements: piece j copies elements j·c … of every rank's shard (n
//     segments, zeros past P_u) into a slot, one reduce-scatter (in place: the
//     rank's sum lands at the slot's start) and the rank's segment is copied
//     back into its shard (⌈S_u / c⌉ calls and n·S_u·g bytes per unit). The
//     rest of the rank's gradient buffer is left as it was: only the shard is
//     read afterwards (the norm and the optimizer).
//
// Slots are sized for fp32 (4 bytes per element) so that a backend may reduce
// a 16-bit bucket in fp32 in place; MpiComm converts into its own fp32 vectors
// instead (comm/mpi_comm.h). Staging (docs/exact-budget.md "Communication
// staging", account comm): ZeRO 0 4·min(slots·bucket, P_r), ZeRO 1
// 4·slots·n·min(c, max_u S_u) bytes.
//
// Overlap with backward (two slots): the backward finishes units from the last
// to the first, so buckets are started from the last one down, each as soon as
// every unit it reads is final (unit_ready), while the backward of earlier
// units goes on. A unit the caller holds back (a tied embedding copy that is
// summed over the embedding group after the schedule) holds back only the
// buckets reading it. Bucket k uses slot k mod 2 and waits for the bucket in
// that slot before reusing it. Every dp rank makes the same unit_ready calls,
// so every rank starts the same buckets in the same order. Without overlap
// (one slot) every bucket is started after the last backward and waited for
// before the next. Either way the same calls and bytes.
//
// No averaging: the backward already seeds d(token loss) = 1/(tokens of the
// global batch), so the sum over the dp replicas is the global mean's gradient.
#pragma once
#include <cstdint>
#include <vector>

#include "comm/comm.h"
#include "kernels/device.h"

namespace gpuledger {

// Elements per bucket: ⌊bucket_mb·2²⁰ / grad_bytes⌋ (throws if < 1).
int64_t bucket_elems(double bucket_mb, int64_t grad_bytes);

// Bytes of fp32 staging the all-reduce plan needs: 4·min(slots·bucket, total_elems).
int64_t grad_bucket_staging_bytes(int64_t bucket, int64_t total_elems, bool overlap);

// Unit elements [off, off + n) <-> staging slot elements [at, at + n).
struct GradPiece {
  size_t unit;
  int64_t off, n, at;
};

// One collective of the reduction.
struct GradBucket {
  size_t first_unit = 0, last_unit = 0;  // the units it reads: all final before it starts
  std::vector<GradPiece> in, out;        // copied into the slot before, back after
  int64_t count = 0;                     // all-reduce: elements; reduce-scatter: per rank
  bool padded = false;                   // part of the slot is padding: zeroed first
};

struct GradReductionPlan {
  CommKind kind = CommKind::kAllReduce;  // kAllReduce or kReduceScatter
  std::vector<GradBucket> buckets;
  int64_t slot_elems = 0;     // elements between two slots
  int64_t staging_bytes = 0;  // fp32 staging of every slot
};

// ZeRO 0: buckets of `bucket` elements over the units laid back to back.
GradReductionPlan all_reduce_plan(const std::vector<int64_t>& elems, int64_t bucket, bool overlap);
// Elements [off, off + n) of unit `unit`.
struct UnitRange {
  size_t unit;
  int64_t off, n;
};
// The same over ranges of the units (in unit order) laid back to back: with
// expert parallelism the dense part of each unit over dp, the expert-sharded
// part over the expert-data-parallel group (grad_sync.h).
GradReductionPlan all_reduce_plan(const std::vector<UnitRange>& ranges, int64_t bucket, bool overlap);
// ZeRO 1: pieces of max(1, ⌊bucket/n⌋) shard elements, unit by unit, for dp rank `rank` of n.
GradReductionPlan reduce_scatter_plan(const std::vector<int64_t>& elems, int64_t n, int64_t rank, int64_t bucket,
                                      bool overlap);
// The same over ranges of the units, each range sharded over the n ranks as
// a unit is (models/transformer/unit_shard.h: a MoE layer's expert part and
// its dense part under ep > 1, each over its own group).
GradReductionPlan reduce_scatter_plan(const std::vector<UnitRange>& ranges, int64_t n, int64_t rank, int64_t bucket,
                                      bool overlap);

class GradBucketReducer {
 public:
  // grads[u]: unit u's gradient buffer (of type g; null on meta, where only
  // the calls run); staging: plan.staging_bytes bytes; slots: 2 with overlap.
  GradBucketReducer(Device& dev, Comm& dp, std::vector<void*> grads, DType g, GradReductionPlan plan, void* staging,
                    bool overlap);
  // The all-reduce plan (ZeRO 0) over units of elems[u] elements;
  // staging: grad_bucket_staging_bytes bytes.
  GradBucketReducer(Device& dev, Comm& dp, std::vector<void*> grads, std::vector<int64_t> elems, DType g,
                    int64_t bucket, void* staging, bool overlap);
  // Waits for whatever is still in flight (a step that failed midway).
  ~GradBucketReducer();
  GradBucketReducer(const GradBucketReducer&) = delete;
  GradBucketReducer& operator=(const GradBucketReducer&) = delete;

  // Unit u's gradient is final for this step. With overlap, starts every
  // bucket not started yet (from the last down) whose units are all final.
  void unit_ready(size_t u);
  // Drives the requests in flight (MPI progresses only inside MPI calls).
  void progress();
  // Every unit final: starts the buckets not started yet and waits for all;
  // the gradients then hold the sums.
  void finish();

  int64_t buckets() const { return static_cast<int64_t>(plan_.buckets.size()); }

 private:
  void start(int64_t k);
  void complete(int64_t slot);
  void* slot_data(int64_t slot) const;

  Device& dev_;
  Comm& dp_;
  std::vector<void*> grads_;
  DType g_;
  GradReductionPlan plan_;
  void* staging_;
  int64_t slots_;
  std::vector<bool> ready_;            // per unit
  std::vector<bool> started_;          // per bucket
  std::vector<CommHandle> in_flight_;  // per slot
  std::vector<int64_t> slot_bucket_;   // per slot: the bucket it holds (−1 when free)
};

}  // namespace gpuledger
