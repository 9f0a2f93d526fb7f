// NcclComm's started collectives (see nccl_comm.h, "Streams"): the request
// and all_reduce_start / all_gather_start / reduce_scatter_start.
#include <chrono>
#include <exception>

#include "comm/nccl_comm.h"
#include "core/check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/device.h"

namespace gpuledger {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

// One started collective: the event its comm-stream work waits on (the
// input's readiness on the device stream), the event recorded after it, its
// staging buffer, and the host seconds spent on it so far.
class NcclRequest final : public CommRequest {
 public:
  NcclRequest(NcclComm& comm, CommKind kind, int64_t bytes, std::string what)
      : comm_(comm), kind_(kind), bytes_(bytes), what_(std::move(what)) {
    CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "creating an event for " + what_);
    CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "creating an event for " + what_);
  }

  ~NcclRequest() override {
    // Never waited: wait now, so the buffers are not freed under the collective.
    if (armed_ && !finished_) {
      try {
        wait();
      } catch (const std::exception& e) {
        log_error_nothrow(std::string("a started NCCL collective could not be waited for: ") + e.what());
      }
    }
    if (ready_) CUDA_CHECK_NOTHROW(cudaEventDestroy(ready_), "destroying an event of " + what_);
    if (done_) CUDA_CHECK_NOTHROW(cudaEventDestroy(done_), "destroying an event of " + what_);
  }

  void wait() override {
    if (!armed_ || finished_) return;
    const auto t0 = Clock::now();
    if (comm_.device_stream_ != nullptr)  // compute queued after this runs once the collective is done
      CUDA_CHECK(cudaStreamWaitEvent(comm_.device_stream_, done_, 0), "ordering the device stream after " + what_);
    else
      CUDA_CHECK(cudaEventSynchronize(done_), "waiting for " + what_);
    finish(seconds_since(t0));
  }

  bool test() override {
    if (!armed_ || finished_) return true;
    const auto t0 = Clock::now();
    const cudaError_t e = cudaEventQuery(done_);
    if (e == cudaErrorNotReady) {
      cudaGetLastError();  // not an error: clear it
      seconds_ += seconds_since(t0);
      return false;
    }
    CUDA_CHECK(e, "asking whether " + what_ + " is done");
    finish(seconds_since(t0));  // complete: later device-stream work needs no wait
    return true;
  }

 private:
  friend class NcclComm;

  void finish(double seconds) {
    finished_ = true;
    --comm_.in_flight_;
    scratch_.reset();  // stream-ordered after the wait above
    if (recv_bytes_ < 0) {
      comm_.book_call(kind_, bytes_, seconds_ + seconds);
      return;
    }
    comm_.book_call(CommKind::kSend, bytes_, (seconds_ + seconds) / 2);  // a send/recv pair: half each
    comm_.book_call(CommKind::kRecv, recv_bytes_, (seconds_ + seconds) / 2);
  }

  NcclComm& comm_;
  CommKind kind_;
  int64_t bytes_;
  int64_t recv_bytes_ = -1;
  std::string what_;
  cudaEvent_t ready_ = nullptr, done_ = nullptr;
  Buffer scratch_;
  double seconds_ = 0;
  bool armed_ = false;     // its work is enqueued (set last in run_started)
  bool finished_ = false;  // waited for, or found complete by test(), and booked
};

CommHandle NcclComm::run_started(const Call& call) {
  const auto t0 = Clock::now();
  auto req = std::make_unique<NcclRequest>(*this, call.kind, call.bytes, call.what);
  req->recv_bytes_ = call.recv_bytes;
  if (call.scratch_bytes > 0) req->scratch_ = device_.alloc(call.scratch_bytes, Account::kWorkspace, "nccl.staging");
  if (device_stream_ != nullptr) {
    // The comm stream starts once the device stream has produced the input.
    CUDA_CHECK(cudaEventRecord(req->ready_, device_stream_), "marking the input of " + call.what);
    CUDA_CHECK(cudaStreamWaitEvent(comm_stream_, req->ready_, 0), "ordering the comm stream for " + call.what);
  } else {
    device_.synchronize();  // stream unknown: the input is ready once the device is idle
  }
  call.body(comm_stream_, req->scratch_.data());
  CUDA_CHECK(cudaEventRecord(req->done_, comm_stream_), "marking the end of " + call.what);
  ++in_flight_;
  req->armed_ = true;
  req->seconds_ = seconds_since(t0);
  return req;
}

CommHandle NcclComm::all_reduce_start(void* buf, int64_t n, DType t, ReduceOp op) {
  return run_started(all_reduce_call(buf, n, t, op));
}

CommHandle NcclComm::all_gather_start(void* out, const void* in, int64_t n, DType t) {
  return run_started(all_gather_call(out, in, n, t));
}

CommHandle NcclComm::reduce_scatter_start(void* out, const void* in, int64_t n, DType t) {
  return run_started(reduce_scatter_call(out, in, n, t));
}

}  // namespace gpuledger
