// Data-parallel gradient reduction in buckets (ZeRO 0 and 1; Megatron's
// DistributedDataParallel grad buffer with --overlap-grad-reduce, PyTorch
// DDP's bucket_cap_mb): the rank's units are laid back to back and cut into
// buckets of ⌊bucket_mb·2²⁰ / g⌋ elements; each bucket is one all-reduce over
// dp (docs/formulas/comm.md: ⌈P_r / bucket⌉ calls, P_r·g bytes). A bucket may
// span units: its pieces are copied into a contiguous staging slot
// (docs/exact-budget.md "Communication staging", account comm), reduced there
// in the gradient dtype and copied back, so a bucket is one call booked at g
// bytes per element. A slot is sized for fp32 (4 bytes per element) so that a
// backend may reduce a 16-bit bucket in fp32 in place; MpiComm converts into
// its own fp32 vectors instead (comm/mpi_comm.h).
//
// Overlap with backward (two slots): the backward finishes units from the last
// to the first, so buckets are started from the last one down, each as soon as
// every unit it touches is final (unit_ready), while the backward of earlier
// units goes on. A unit the caller holds back (a tied embedding copy that is
// summed over the embedding group after the schedule) holds back only the
// buckets touching it. Bucket k uses slot k mod 2 and waits for the bucket in
// that slot before reusing it. Every dp rank makes the same unit_ready calls,
// so every rank starts the same buckets in the same order. Staging: 4·min(2·bucket, P_r) bytes. Without overlap (one slot)
// every bucket is started after the last backward and waited for before the
// next: 4·min(bucket, P_r) bytes. Either way the same calls and bytes.
//
// No averaging: the backward already seeds d(token loss) = 1/(tokens of the
// global batch), so the sum over the dp replicas is the global mean's gradient.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/device.h"
#include "comm/comm.h"

namespace gpuledger {

// Elements per bucket: ⌊bucket_mb·2²⁰ / grad_bytes⌋ (throws if < 1).
int64_t bucket_elems(double bucket_mb, int64_t grad_bytes);

// Bytes of fp32 staging the reduction needs: 4·min(slots·bucket, total_elems).
int64_t grad_bucket_staging_bytes(int64_t bucket, int64_t total_elems, bool overlap);

class GradBucketReducer {
 public:
  // grads[u]: unit u's gradient buffer (elems[u] elements of type g; null on
  // meta, where only the calls run); staging: grad_bucket_staging_bytes bytes.
  GradBucketReducer(Device& dev, Comm& dp, std::vector<void*> grads, std::vector<int64_t> elems,
                    DType g, int64_t bucket, void* staging, bool overlap);
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

  int64_t buckets() const { return static_cast<int64_t>(first_unit_.size()); }

 private:
  void start(int64_t k);
  void complete(int64_t slot);
  struct Piece { size_t unit; int64_t off, n, at; };
  std::vector<Piece> pieces(int64_t k) const;

  Device& dev_;
  Comm& dp_;
  std::vector<void*> grads_;
  std::vector<int64_t> elems_, unit_start_;
  DType g_;
  int64_t bucket_, total_ = 0;
  void* staging_;
  int64_t slots_;
  std::vector<size_t> first_unit_, last_unit_;  // per bucket: the units it touches
  std::vector<bool> ready_;             // per unit
  std::vector<bool> started_;           // per bucket
  std::vector<CommHandle> in_flight_;   // per slot
  std::vector<int64_t> slot_bucket_;    // per slot: the bucket it holds (−1 when free)
  std::vector<std::vector<Piece>> slot_pieces_;  // per slot: that bucket's pieces
};

}  // namespace gpuledger
