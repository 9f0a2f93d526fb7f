// CudaDevice::start_timer (device.h, "timing"): a pair of CUDA events recorded
// on the device's stream around the work to time, read with
// cudaEventElapsedTime (milliseconds, about half a microsecond of resolution,
// per the CUDA runtime API reference). The start event needs no synchronize:
// it completes when the work queued before it has, so the interval holds only
// what was queued after it (and any idle gap while the host launches). stop
// waits for the stop event alone, not for the whole device.
#include <cuda_runtime.h>

#include <memory>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_device.cuh"

namespace gpuledger {
inline namespace cuda_backend {
namespace {

class CudaEventTimer final : public DeviceTimer {
 public:
  explicit CudaEventTimer(cudaStream_t stream) : stream_(stream) {
    try {
      CUDA_CHECK(cudaEventCreate(&start_), "creating a timing event");
      CUDA_CHECK(cudaEventCreate(&stop_), "creating a timing event");
      CUDA_CHECK(cudaEventRecord(start_, stream_), "recording the start event");
    } catch (...) {
      destroy();
      throw;
    }
  }
  ~CudaEventTimer() override { destroy(); }
  CudaEventTimer(const CudaEventTimer&) = delete;
  CudaEventTimer& operator=(const CudaEventTimer&) = delete;

  double stop_seconds() override {
    CUDA_CHECK(cudaEventRecord(stop_, stream_), "recording the stop event");
    CUDA_CHECK(cudaEventSynchronize(stop_), "waiting for the stop event");
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_), "reading the time between two events");
    return static_cast<double>(ms) * 1e-3;
  }

 private:
  void destroy() noexcept {
    if (start_) CUDA_CHECK_NOTHROW(cudaEventDestroy(start_), "destroying a timing event");
    if (stop_) CUDA_CHECK_NOTHROW(cudaEventDestroy(stop_), "destroying a timing event");
    start_ = stop_ = nullptr;
  }

  cudaStream_t stream_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace

std::unique_ptr<DeviceTimer> CudaDevice::start_timer() { return std::make_unique<CudaEventTimer>(stream_); }

}  // namespace cuda_backend
}  // namespace gpuledger
