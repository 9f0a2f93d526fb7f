// NcclComm: the Comm interface over an NCCL communicator, on device buffers
// (the CUDA backend's memory), one GPU per rank. Built only with CUDA and NCCL
// (files named nccl_*.cpp are left out otherwise); plain C++ callers use
// make_nccl_comm (make_nccl_comm.h), which needs no CUDA or NCCL header.
//
// Bootstrap: made from the group's MPI communicator (an MpiComm, which it
// keeps): group rank 0 calls ncclGetUniqueId, MPI_Bcast hands the id to the
// group, every member calls ncclCommInitRank on the GPU its CudaDevice bound
// (NCCL's "Creating a communicator with options / MPI" example). Collective
// over the group; NCCL refuses two ranks of one communicator on one GPU.
//
// Streams. Blocking calls are enqueued on the CudaDevice's stream — ordered
// after the kernels that produced their input, with no extra event — and then
// waited for with cudaStreamSynchronize: the Comm contract is blocking (the
// caller may read the result, free or reuse the buffer at once) and the
// seconds booked must be the collective's, not the launch's. Started calls
// (all_reduce_start, all_gather_start, reduce_scatter_start) run on a comm
// stream of this communicator: an event recorded on the device stream makes
// the comm stream wait for the input, the NCCL call and any staging copy go on
// the comm stream, and a done event is recorded; wait() makes the device
// stream wait for that event (cudaStreamWaitEvent: no host block, so compute
// queued after wait() runs when the collective is done) and test() queries
// it. A blocking call made while started ones are in flight first makes the
// device stream wait for the comm stream, so this communicator's collectives
// run in the order they were issued on every rank. When the Device is not a
// CudaDevice (e.g. wrapped in a ProfilingDevice) its stream is unknown: every
// call then synchronizes the device first and runs on the comm stream, and
// wait() blocks the host on the done event.
//
// Precision: bf16 and fp16 reductions are NCCL's own (ncclBfloat16,
// ncclFloat16). NCCL does not document fp32 accumulation, and its reduction
// functors (NVIDIA/nccl src/device/reduce_kernel.h: FuncSum<T> with EltType
// T) combine two values of the wire type per step, the result stored in that
// type again: the ring all-reduce adds one rank's chunk per hop, so a sum over
// n ranks is rounded to 16 bits up to n − 1 times, where MpiComm (fp32
// staging) rounds once. Every rank still gets the same bits in the ring and
// tree algorithms (each reduced chunk is then copied as it is). Tests
// therefore use sums that are exact in 16 bits, or a dtype tolerance.
//
// Booking: as MpiComm — one call, comm_call_bytes (nccl-tests sizing), and the
// seconds: the whole blocking call (enqueue + synchronize), or for a started
// call the host seconds spent inside start, test and wait (the exposed
// communication time, comm.h). barrier books nothing. Staging buffers
// (nccl_rules.h) are booked as workspace while they live.
//
// barrier(): drains this rank's device and comm streams, then MPI_Barrier over
// the group's MPI communicator — a host barrier, which is what callers mean
// by one (an NCCL all-reduce of one element would only order the GPUs).
//
// Counts are elements (size_t for NCCL); a negative count throws
// std::invalid_argument. Errors throw CommError (NCCL_CHECK, nccl_check.h) or
// gpuledger::Error (CUDA_CHECK), naming the group and what was being done.
#pragma once
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <functional>
#include <memory>
#include <string>

#include "comm/comm.h"
#include "comm/mpi_comm.h"

namespace gpuledger {

class Device;
class NcclRequest;

class NcclComm final : public Comm {
 public:
  // Collective over `mpi`'s group. `device` is this rank's CUDA device (its
  // GPU must be the current one); `device_stream` is the stream it runs ops
  // on, or nullptr when unknown (see above). The group name and counters are
  // `mpi`'s.
  NcclComm(std::unique_ptr<MpiComm> mpi, CommCounters& counters, Device& device, cudaStream_t device_stream);
  ~NcclComm() override;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int64_t size() const override { return mpi_->size(); }
  int64_t rank() const override { return mpi_->rank(); }
  ncclComm_t handle() const { return comm_; }

  void all_reduce(void* buf, int64_t n, DType t, ReduceOp op = ReduceOp::kSum) override;
  void all_gather(void* out, const void* in, int64_t n, DType t) override;
  void reduce_scatter(void* out, const void* in, int64_t n, DType t) override;
  // One ncclSend and one ncclRecv of n elements per peer (itself included)
  // inside ncclGroupStart/End, as nccl-tests' alltoall runs it
  // (src/alltoall.cu, AlltoAllRunColl).
  void all_to_all(void* out, const void* in, int64_t n, DType t) override;
  void broadcast(void* buf, int64_t n, DType t, int64_t root) override;
  void send(const void* buf, int64_t n, DType t, int64_t peer) override;
  void recv(void* buf, int64_t n, DType t, int64_t peer) override;
  void barrier() override;

  CommHandle all_reduce_start(void* buf, int64_t n, DType t, ReduceOp op = ReduceOp::kSum) override;
  CommHandle all_gather_start(void* out, const void* in, int64_t n, DType t) override;
  CommHandle reduce_scatter_start(void* out, const void* in, int64_t n, DType t) override;
  // ncclSend and ncclRecv inside one ncclGroupStart/End on the comm stream
  // (a ring of separate blocking sends would wait in a cycle on the GPU).
  CommHandle send_recv_start(const void* send, int64_t n_send, int64_t to, void* recv, int64_t n_recv, int64_t from,
                             DType t) override;
  bool overlaps_compute() const override { return true; }

 private:
  friend class NcclRequest;

  // One call: what it books, what it is (for error messages), the staging
  // buffer it needs (0: none) and the body that enqueues its copies and NCCL
  // call on a stream, given the staging buffer.
  struct Call {
    Call(CommKind k, int64_t b, std::string w) : kind(k), bytes(b), what(std::move(w)) {}
    CommKind kind;
    int64_t bytes;
    std::string what;
    int64_t scratch_bytes = 0;
    int64_t recv_bytes = -1;  // >= 0: a send/recv pair, booked as a send of `bytes` and a recv of these
    std::function<void(cudaStream_t, void* scratch)> body;
  };
  Call all_reduce_call(void* buf, int64_t n, DType t, ReduceOp op);
  Call all_gather_call(void* out, const void* in, int64_t n, DType t);
  Call reduce_scatter_call(void* out, const void* in, int64_t n, DType t);
  void run_blocking(const Call& call);
  CommHandle run_started(const Call& call);  // nccl_async.cpp
  // Makes the device stream wait for everything on the comm stream so far.
  void order_after_comm_stream();
  void book_call(CommKind kind, int64_t bytes, double seconds) { book(kind, bytes, seconds); }
  void release() noexcept;

  std::unique_ptr<MpiComm> mpi_;
  Device& device_;
  cudaStream_t device_stream_ = nullptr;  // not owned; nullptr: unknown
  cudaStream_t comm_stream_ = nullptr;    // owned
  cudaEvent_t comm_tail_ = nullptr;       // owned: order_after_comm_stream's event
  ncclComm_t comm_ = nullptr;
  int64_t in_flight_ = 0;  // started and not yet waited
};

}  // namespace gpuledger
