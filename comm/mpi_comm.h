// MpiComm: the Comm interface over an MPI communicator, on host buffers (the
// CPU backend's memory). Built only with MPI (files named mpi_*.cpp are left
// out otherwise).
//
// Precision: bf16 and fp16 reductions (all_reduce, reduce_scatter) go through
// fp32. Each rank converts its 16-bit input into an fp32 staging vector, MPI
// reduces in fp32, and the fp32 result is converted back once. So a value is
// rounded to 16 bits exactly once, after the whole sum, and every rank gets the
// same result, bit for bit, since every rank converts the same fp32 values
// (MPI's reduction is fp32 addition, commutative, and Open MPI's all-reduce
// algorithms hand every rank the same combination; test_mpi_comm checks it).
// The fp32 staging vectors are host memory owned by this call, outside the
// Device ledger, as MPI's own internal buffers are. Data movement alone
// (all_gather, broadcast, send/recv) copies the 16-bit values as they are.
//
// Booking: every call adds one call, its bytes (comm_bytes.h: nccl-tests
// sizing) and its steady_clock seconds (staging conversions included) to
// "<kind>@<group>"; barrier books nothing. Groups of one rank should use
// make_self_comm, which books nothing, instead of an MpiComm.
//
// Counts are elements; MPI counts are int, so a call of more than INT_MAX
// elements (or bytes, for send/recv/broadcast) throws std::length_error.
#pragma once
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "comm/comm.h"

namespace gpuledger {

class MpiComm final : public Comm {
 public:
  // Takes ownership of `comm` (freed by the destructor unless it is
  // MPI_COMM_WORLD or MPI_COMM_SELF).
  MpiComm(std::string group, CommCounters& counters, MPI_Comm comm);
  ~MpiComm() override;
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;

  int64_t size() const override { return size_; }
  int64_t rank() const override { return rank_; }
  MPI_Comm handle() const { return comm_; }

  void all_reduce(void* buf, int64_t n, DType t, ReduceOp op = ReduceOp::kSum) override;
  void all_gather(void* out, const void* in, int64_t n, DType t) override;
  void reduce_scatter(void* out, const void* in, int64_t n, DType t) override;
  // MPI_Alltoall, the 16-bit values moved as they are.
  void all_to_all(void* out, const void* in, int64_t n, DType t) override;
  void broadcast(void* buf, int64_t n, DType t, int64_t root) override;
  // Point-to-point on one fixed tag; messages between two ranks arrive in order.
  void send(const void* buf, int64_t n, DType t, int64_t peer) override;
  void recv(void* buf, int64_t n, DType t, int64_t peer) override;
  void barrier() override;

  // Nonblocking: MPI_Iallreduce / MPI_Iallgather / MPI_Ireduce_scatter_block.
  // A 16-bit reduction converts into an fp32 vector owned by the request (so
  // requests in flight do not share staging) and back at completion. Open MPI
  // progresses these only inside MPI calls (no progress thread over the
  // shared-memory transport), so a caller overlapping compute calls test()
  // between pieces of work.
  CommHandle all_reduce_start(void* buf, int64_t n, DType t, ReduceOp op = ReduceOp::kSum) override;
  CommHandle all_gather_start(void* out, const void* in, int64_t n, DType t) override;
  CommHandle reduce_scatter_start(void* out, const void* in, int64_t n, DType t) override;
  // MPI_Isend + MPI_Irecv on the point-to-point tag; the received count is
  // checked at completion, as recv checks it.
  CommHandle send_recv_start(const void* send, int64_t n_send, int64_t to, void* recv, int64_t n_recv, int64_t from,
                             DType t) override;
  bool overlaps_compute() const override { return true; }

  static constexpr int kTag = 4242;

 private:
  MPI_Comm comm_;
  int64_t size_ = 0, rank_ = 0;
  std::vector<float> stage_in_, stage_out_;  // fp32 staging of 16-bit reductions, reused
  friend class MpiRequest;
  void book_completed(CommKind kind, int64_t bytes, double seconds) { book(kind, bytes, seconds); }
};

// Collective over MPI_COMM_WORLD (MPI_Comm_split): every world rank calls it,
// in the same order as every other rank, with `members` = the world ranks of
// the group it belongs to, in group order (this rank included), or an empty
// list when it belongs to no group of this kind (it then gets nullptr). The
// groups of one call must not overlap (tp, dp, pp and emb groups each
// partition the ranks they cover). The new comm's rank is this rank's position
// in `members`.
std::unique_ptr<MpiComm> split_world_comm(std::string group, CommCounters& counters,
                                          const std::vector<int64_t>& members);

}  // namespace gpuledger
