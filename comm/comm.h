// Comm: the collectives the training code calls, one interface for every
// backend (MPI on host buffers, NCCL on device buffers, null for one rank and
// the meta simulation). Every call books its calls, bytes and seconds in the
// rank's CommCounters under "<kind>@<group>" (docs/architecture.md "Reports"); bytes are
// counted as nccl-tests sizes a call: all-reduce the buffer, reduce-scatter its
// input, all-gather its output, all-to-all its send buffer, send/recv the message.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "core/collective.h"  // CommKind, comm_kind_name
#include "core/dtype.h"
#include "core/trace.h"

namespace gpuledger {

enum class ReduceOp { kSum, kMax };

struct CommCount {
  int64_t calls = 0;
  int64_t bytes = 0;
  double seconds = 0;
};

// Per-rank counters keyed "<kind>@<group>" (e.g. "all_reduce@dp"). With a
// TraceRecorder attached, every call booked is also a slice on the stream
// "comm <group>", ending when it was booked (core/trace.h).
class CommCounters {
 public:
  void add(CommKind kind, std::string_view group, int64_t bytes, double seconds);
  const std::map<std::string, CommCount>& by_key() const { return counts_; }
  void reset() { counts_.clear(); }
  // nullptr detaches; the recorder must outlive the counters or be detached first.
  void set_trace(TraceRecorder* trace) { trace_ = trace; }

 private:
  std::map<std::string, CommCount> counts_;
  TraceRecorder* trace_ = nullptr;
};

// One communicator over a group of ranks. Buffers live on the Device the
// backend pairs with (host memory for MPI, device memory for NCCL). Counts are
// elements of `t`. Collectives are blocking from the caller's view.
// A collective in flight, from one of Comm's *_start calls. wait() returns
// when it is complete (the buffers hold the result and may be reused) and
// books it; test() drives progress and says whether it is complete without
// blocking. Destroying a request that was never waited for waits for it, so a
// buffer is never freed under a collective in flight.
class CommRequest {
 public:
  virtual ~CommRequest() = default;
  virtual void wait() = 0;  // idempotent
  virtual bool test() = 0;  // true once complete (then wait() returns at once)
};
using CommHandle = std::unique_ptr<CommRequest>;

class Comm {
 public:
  Comm(std::string group, CommCounters& counters) : group_(std::move(group)), counters_(counters) {}
  virtual ~Comm() = default;
  virtual int64_t size() const = 0;
  virtual int64_t rank() const = 0;  // rank within the group
  const std::string& group() const { return group_; }

  // buf (n) = reduce over the group, in place.
  virtual void all_reduce(void* buf, int64_t n, DType t, ReduceOp op = ReduceOp::kSum) = 0;
  // out (n · size) = concatenation of every rank's in (n), in group order.
  virtual void all_gather(void* out, const void* in, int64_t n, DType t) = 0;
  // out (n) = this rank's slice of the sum of every rank's in (n · size).
  virtual void reduce_scatter(void* out, const void* in, int64_t n, DType t) = 0;
  // out (n · size): block i (n elements) is block `rank` of group rank i's in
  // (n · size); block j of this rank's in goes to group rank j (equal splits:
  // MPI_Alltoall; NCCL as nccl-tests' alltoall, one ncclSend/ncclRecv pair per
  // peer in a group). in and out must not overlap.
  virtual void all_to_all(void* out, const void* in, int64_t n, DType t) = 0;
  virtual void broadcast(void* buf, int64_t n, DType t, int64_t root) = 0;
  virtual void send(const void* buf, int64_t n, DType t, int64_t peer) = 0;
  virtual void recv(void* buf, int64_t n, DType t, int64_t peer) = 0;
  virtual void barrier() = 0;

  // Nonblocking collectives (async start / wait; PyTorch's async_op=True,
  // MPI_Iallreduce, NCCL on a side stream): same arguments and results as the
  // blocking calls; the buffers must not be touched until the request
  // completes. Requests complete in any order, but every rank of the group
  // must start the same collectives in the same order. A collective is booked
  // once, when it completes, with the seconds spent inside the start and the
  // wait/test calls — the communication time the caller was exposed to, not
  // the time the transfer took. The defaults here run the blocking call and
  // return a completed request (a comm that cannot overlap: self, meta);
  // MpiComm and NcclComm override them.
  virtual CommHandle all_reduce_start(void* buf, int64_t n, DType t, ReduceOp op = ReduceOp::kSum);
  virtual CommHandle all_gather_start(void* out, const void* in, int64_t n, DType t);
  virtual CommHandle reduce_scatter_start(void* out, const void* in, int64_t n, DType t);
  // Nonblocking point-to-point: a send of n_send elements of `send` to group
  // rank `to` and a receive of n_recv elements into `recv` from `from`,
  // started together (MPI_Isend + MPI_Irecv; ncclSend + ncclRecv in one NCCL
  // group on the comm stream) — TransformerEngine's ring attention posts its
  // K/V exchange so (batch_isend_irecv in AttnFuncWithCPAndKVP2P), so that the
  // transfer runs while the current block computes. The buffers must not
  // overlap, and must not be touched until the request completes. Booked once
  // complete as one send and one recv (comm_bytes.h), the exposed seconds
  // split between the two. The default runs the blocking send and recv inside
  // the start — even group ranks send first, odd ones receive first, so a
  // ring of these pairs never waits in a cycle — and returns a completed request.
  virtual CommHandle send_recv_start(const void* send, int64_t n_send, int64_t to, void* recv, int64_t n_recv,
                                     int64_t from, DType t);
  // Whether a started collective progresses while the caller computes (NCCL
  // on its own stream: yes; MPI: only inside MPI calls, i.e. test(); the
  // default: no, it ran inside start).
  virtual bool overlaps_compute() const { return false; }

 protected:
  void book(CommKind kind, int64_t bytes, double seconds) { counters_.add(kind, group_, bytes, seconds); }

 private:
  std::string group_;
  CommCounters& counters_;
};

class Device;

// A group of one rank: all_reduce and broadcast leave the buffer as it is,
// all_gather, reduce_scatter and all_to_all copy in to out through the Device; nothing is
// booked (a one-rank group moves no bytes). send/recv on it throw.
std::unique_ptr<Comm> make_self_comm(std::string group, CommCounters& counters, Device& device);

}  // namespace gpuledger
