// NcclComm (see nccl_comm.h): bootstrap over MPI, the blocking calls, barrier,
// and make_nccl_comm. The started (async) calls are in nccl_async.cpp.
#include "comm/nccl_comm.h"

#include <chrono>
#include <stdexcept>

#include "comm/comm_bytes.h"
#include "comm/make_nccl_comm.h"
#include "comm/mpi_check.h"
#include "comm/nccl_check.h"
#include "comm/nccl_rules.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/make_cuda_device.h"
#include "kernels/device.h"

namespace gpuledger {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string describe(const char* what, int64_t n, DType t, const std::string& group) {
  return std::string(what) + " " + std::to_string(n) + " " + std::string(dtype_name(t)) + " elements over '" + group +
         "' (NCCL)";
}

size_t nccl_count(int64_t n, const std::string& group, const char* what) {
  if (n < 0) throw std::invalid_argument(std::string(what) + " on '" + group + "': negative count");
  return static_cast<size_t>(n);
}

void check_peer(int64_t peer, int64_t size, const std::string& group, const char* what) {
  if (peer < 0 || peer >= size)
    throw std::invalid_argument(std::string(what) + " on '" + group + "': peer " + std::to_string(peer) +
                                " outside the group of " + std::to_string(size));
}

}  // namespace

NcclComm::NcclComm(std::unique_ptr<MpiComm> mpi, CommCounters& counters, Device& device, cudaStream_t device_stream)
    : Comm(mpi->group(), counters), mpi_(std::move(mpi)), device_(device), device_stream_(device_stream) {
  const MPI_Comm h = mpi_->handle();
  // Group rank 0 makes the id; its success travels with it, so that a failure
  // there fails every member here instead of leaving them in MPI_Bcast.
  int ok = 1;
  ncclUniqueId id{};
  std::string id_error;
  if (rank() == 0) {
    const ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) {
      ok = 0;
      id_error = detail::nccl_error_string(r);
    }
  }
  MPI_CHECK(MPI_Bcast(&ok, 1, MPI_INT, 0, h), "sharing the NCCL bootstrap status of '" + group() + "'");
  if (!ok)
    throw CommError("NCCL", "ncclGetUniqueId(&id)", rank() == 0 ? id_error : "failed on group rank 0 (see its error)",
                    "making the NCCL unique id of '" + group() + "'", __FILE__, __LINE__);
  MPI_CHECK(MPI_Bcast(&id, static_cast<int>(sizeof id), MPI_BYTE, 0, h),
            "broadcasting the NCCL unique id over '" + group() + "'");
  try {
    NCCL_CHECK(ncclCommInitRank(&comm_, static_cast<int>(size()), id, static_cast<int>(rank())),
               "creating the NCCL communicator of '" + group() + "' (group rank " + std::to_string(rank()) + " of " +
                   std::to_string(size()) + ")");
    CUDA_CHECK(cudaStreamCreateWithFlags(&comm_stream_, cudaStreamNonBlocking),
               "creating the comm stream of '" + group() + "'");
    CUDA_CHECK(cudaEventCreateWithFlags(&comm_tail_, cudaEventDisableTiming), "creating an event of '" + group() + "'");
  } catch (...) {
    release();
    throw;
  }
}

NcclComm::~NcclComm() { release(); }

void NcclComm::release() noexcept {
  if (comm_stream_)
    CUDA_CHECK_NOTHROW(cudaStreamSynchronize(comm_stream_), "draining the comm stream of '" + group() + "'");
  if (comm_) {
    NCCL_CHECK_NOTHROW(ncclCommDestroy(comm_), "destroying the NCCL communicator of '" + group() + "'");
    comm_ = nullptr;
  }
  if (comm_tail_) {
    CUDA_CHECK_NOTHROW(cudaEventDestroy(comm_tail_), "destroying an event of '" + group() + "'");
    comm_tail_ = nullptr;
  }
  if (comm_stream_) {
    CUDA_CHECK_NOTHROW(cudaStreamDestroy(comm_stream_), "destroying the comm stream of '" + group() + "'");
    comm_stream_ = nullptr;
  }
}

void NcclComm::order_after_comm_stream() {
  CUDA_CHECK(cudaEventRecord(comm_tail_, comm_stream_), "marking the comm stream of '" + group() + "'");
  CUDA_CHECK(cudaStreamWaitEvent(device_stream_, comm_tail_, 0),
             "ordering the device stream after the comm stream of '" + group() + "'");
}

// Enqueued on the device stream, then waited for: see the header (blocking
// contract; the booked seconds are the collective's, not the launch's).
void NcclComm::run_blocking(const Call& call) {
  const auto t0 = Clock::now();
  Buffer scratch;
  if (call.scratch_bytes > 0) scratch = device_.alloc(call.scratch_bytes, Account::kWorkspace, "nccl.staging");
  cudaStream_t s = device_stream_;
  if (s != nullptr) {
    if (in_flight_ > 0) order_after_comm_stream();  // this comm's collectives in issue order
  } else {
    device_.synchronize();  // stream unknown: the input is ready once the device is idle
    s = comm_stream_;
  }
  call.body(s, scratch.data());
  CUDA_CHECK(cudaStreamSynchronize(s), "waiting for " + call.what);
  scratch.reset();
  book_call(call.kind, call.bytes, seconds_since(t0));
}

NcclComm::Call NcclComm::all_reduce_call(void* buf, int64_t n, DType t, ReduceOp op) {
  const size_t count = nccl_count(n, group(), "all_reduce");
  Call c{CommKind::kAllReduce, comm_call_bytes(CommKind::kAllReduce, n, t, size()),
         describe("all-reducing", n, t, group())};
  c.body = [this, buf, count, t, op, what = c.what](cudaStream_t s, void*) {
    if (count == 0) return;
    NCCL_CHECK(ncclAllReduce(buf, buf, count, nccl_dtype(t), nccl_red_op(op), comm_, s), what);
  };
  return c;
}

NcclComm::Call NcclComm::all_gather_call(void* out, const void* in, int64_t n, DType t) {
  const size_t count = nccl_count(n, group(), "all_gather");
  const int64_t n_bytes = n * dtype_bytes(t);
  Call c{CommKind::kAllGather, comm_call_bytes(CommKind::kAllGather, n, t, size()),
         describe("all-gathering", n, t, group())};
  const bool staged = all_gather_aliasing(out, in, n_bytes, rank(), size()) == NcclAliasing::kStaged;
  if (staged && n_bytes > 0) c.scratch_bytes = n_bytes;
  c.body = [this, out, in, count, n_bytes, t, staged, what = c.what](cudaStream_t s, void* scratch) {
    if (count == 0) return;
    const void* send = in;
    if (staged) {  // the input overlaps the output elsewhere than its own slice
      CUDA_CHECK(cudaMemcpyAsync(scratch, in, static_cast<size_t>(n_bytes), cudaMemcpyDeviceToDevice, s),
                 "staging the input of " + what);
      send = scratch;
    }
    NCCL_CHECK(ncclAllGather(send, out, count, nccl_dtype(t), comm_, s), what);
  };
  return c;
}

NcclComm::Call NcclComm::reduce_scatter_call(void* out, const void* in, int64_t n, DType t) {
  const size_t count = nccl_count(n, group(), "reduce_scatter");
  const int64_t n_bytes = n * dtype_bytes(t);
  Call c{CommKind::kReduceScatter, comm_call_bytes(CommKind::kReduceScatter, n, t, size()),
         describe("reduce-scattering", n, t, group())};
  const bool staged = reduce_scatter_aliasing(out, in, n_bytes, rank(), size()) == NcclAliasing::kStaged;
  if (staged && n_bytes > 0) c.scratch_bytes = n_bytes;
  c.body = [this, out, in, count, n_bytes, t, staged, what = c.what](cudaStream_t s, void* scratch) {
    if (count == 0) return;
    // Staged (e.g. in == out on rank > 0): the slice lands in scratch, then at out.
    NCCL_CHECK(ncclReduceScatter(in, staged ? scratch : out, count, nccl_dtype(t), ncclSum, comm_, s), what);
    if (staged)
      CUDA_CHECK(cudaMemcpyAsync(out, scratch, static_cast<size_t>(n_bytes), cudaMemcpyDeviceToDevice, s),
                 "copying out the slice of " + what);
  };
  return c;
}

void NcclComm::all_reduce(void* buf, int64_t n, DType t, ReduceOp op) { run_blocking(all_reduce_call(buf, n, t, op)); }

void NcclComm::all_gather(void* out, const void* in, int64_t n, DType t) {
  run_blocking(all_gather_call(out, in, n, t));
}

void NcclComm::reduce_scatter(void* out, const void* in, int64_t n, DType t) {
  run_blocking(reduce_scatter_call(out, in, n, t));
}

void NcclComm::all_to_all(void* out, const void* in, int64_t n, DType t) {
  const size_t count = nccl_count(n, group(), "all_to_all");
  const int64_t block_bytes = n * dtype_bytes(t);
  const int64_t total_bytes = block_bytes * size();
  const auto* o = static_cast<const char*>(out);
  const auto* i = static_cast<const char*>(in);
  if (total_bytes > 0 && o < i + total_bytes && i < o + total_bytes)
    throw std::invalid_argument("all_to_all on '" + group() + "': the send and receive buffers overlap");
  Call c{CommKind::kAllToAll, comm_call_bytes(CommKind::kAllToAll, n, t, size()),
         describe("all-to-all of", n, t, group()) + " per peer"};
  c.body = [this, out, in, count, block_bytes, t, what = c.what](cudaStream_t s, void*) {
    if (count == 0) return;
    NCCL_CHECK(ncclGroupStart(), "opening the group of " + what);
    for (int64_t peer = 0; peer < size(); ++peer) {
      NCCL_CHECK(ncclSend(static_cast<const char*>(in) + peer * block_bytes, count, nccl_dtype(t),
                          static_cast<int>(peer), comm_, s),
                 what + ": the send to peer " + std::to_string(peer));
      NCCL_CHECK(ncclRecv(static_cast<char*>(out) + peer * block_bytes, count, nccl_dtype(t), static_cast<int>(peer),
                          comm_, s),
                 what + ": the receive from peer " + std::to_string(peer));
    }
    NCCL_CHECK(ncclGroupEnd(), "closing the group of " + what);
  };
  run_blocking(c);
}

void NcclComm::broadcast(void* buf, int64_t n, DType t, int64_t root) {
  const size_t count = nccl_count(n, group(), "broadcast");
  if (root < 0 || root >= size())
    throw std::invalid_argument("broadcast on '" + group() + "': root " + std::to_string(root) +
                                " outside the group of " + std::to_string(size()));
  Call c{CommKind::kBroadcast, comm_call_bytes(CommKind::kBroadcast, n, t, size()),
         describe("broadcasting", n, t, group()) + " from root " + std::to_string(root)};
  c.body = [this, buf, count, t, root, what = c.what](cudaStream_t s, void*) {
    if (count == 0) return;
    NCCL_CHECK(ncclBroadcast(buf, buf, count, nccl_dtype(t), static_cast<int>(root), comm_, s), what);
  };
  run_blocking(c);
}

void NcclComm::send(const void* buf, int64_t n, DType t, int64_t peer) {
  const size_t count = nccl_count(n, group(), "send");
  check_peer(peer, size(), group(), "send");
  Call c{CommKind::kSend, comm_call_bytes(CommKind::kSend, n, t, size()),
         describe("sending", n, t, group()) + " to peer " + std::to_string(peer)};
  c.body = [this, buf, count, t, peer, what = c.what](cudaStream_t s, void*) {
    if (count == 0) return;
    NCCL_CHECK(ncclSend(buf, count, nccl_dtype(t), static_cast<int>(peer), comm_, s), what);
  };
  run_blocking(c);
}

void NcclComm::recv(void* buf, int64_t n, DType t, int64_t peer) {
  const size_t count = nccl_count(n, group(), "recv");
  check_peer(peer, size(), group(), "recv");
  Call c{CommKind::kRecv, comm_call_bytes(CommKind::kRecv, n, t, size()),
         describe("receiving", n, t, group()) + " from peer " + std::to_string(peer)};
  c.body = [this, buf, count, t, peer, what = c.what](cudaStream_t s, void*) {
    if (count == 0) return;
    NCCL_CHECK(ncclRecv(buf, count, nccl_dtype(t), static_cast<int>(peer), comm_, s), what);
  };
  run_blocking(c);
}

// Started on the comm stream (run_started, nccl_async.cpp): the device
// stream's work before it (the send buffer's producer) first.
CommHandle NcclComm::send_recv_start(const void* send, int64_t n_send, int64_t to, void* recv, int64_t n_recv,
                                     int64_t from, DType t) {
  const size_t send_count = nccl_count(n_send, group(), "send");
  const size_t recv_count = nccl_count(n_recv, group(), "recv");
  check_peer(to, size(), group(), "send");
  check_peer(from, size(), group(), "recv");
  Call c{CommKind::kSend, comm_call_bytes(CommKind::kSend, n_send, t, size()),
         describe("sending (started)", n_send, t, group()) + " to peer " + std::to_string(to) + " and receiving " +
             std::to_string(n_recv) + " from peer " + std::to_string(from)};
  c.recv_bytes = comm_call_bytes(CommKind::kRecv, n_recv, t, size());
  c.body = [this, send, send_count, to, recv, recv_count, from, t, what = c.what](cudaStream_t s, void*) {
    NCCL_CHECK(ncclGroupStart(), "opening the group of " + what);
    if (send_count > 0) NCCL_CHECK(ncclSend(send, send_count, nccl_dtype(t), static_cast<int>(to), comm_, s), what);
    if (recv_count > 0) NCCL_CHECK(ncclRecv(recv, recv_count, nccl_dtype(t), static_cast<int>(from), comm_, s), what);
    NCCL_CHECK(ncclGroupEnd(), "closing the group of " + what);
  };
  return run_started(c);
}

// A host barrier (see the header): this rank's GPU work first, then MPI.
void NcclComm::barrier() {
  if (device_stream_)
    CUDA_CHECK(cudaStreamSynchronize(device_stream_),
               "draining the device stream before a barrier over '" + group() + "'");
  else
    device_.synchronize();
  CUDA_CHECK(cudaStreamSynchronize(comm_stream_), "draining the comm stream before a barrier over '" + group() + "'");
  mpi_->barrier();
}

std::unique_ptr<Comm> make_nccl_comm(std::unique_ptr<MpiComm> mpi, CommCounters& counters, Device& device) {
  if (device.name() != "cuda")
    throw std::invalid_argument("the NCCL comm" + (mpi ? " of '" + mpi->group() + "'" : std::string()) +
                                " needs the cuda backend's device, not '" + device.name() + "'");
  if (!mpi) throw std::invalid_argument("make_nccl_comm: no MPI communicator to bootstrap over");
  auto stream = static_cast<cudaStream_t>(cuda_device_stream(device));  // nullptr: wrapped device
  return std::make_unique<NcclComm>(std::move(mpi), counters, device, stream);
}

}  // namespace gpuledger
