// CudaDevice: the CUDA backend (docs/architecture.md "Three backends"). SimtDevice's
// kernels plus what makes them run on a GPU:
//   - memory: every byte through Device::alloc (the ledger books it first),
//     served by a stream-ordered pool of our own (cudaMallocFromPoolAsync /
//     cudaFreeAsync on the device's stream; plain cudaMalloc where pools are
//     unsupported). The pool keeps freed memory for reuse (release threshold:
//     unlimited) — a training step frees and reallocates the same sizes every
//     layer — and memory_info() trims it before asking cudaMemGetInfo, so the
//     device's own figure shows what the ledger does not: the CUDA context,
//     cuBLASLt's and the driver's internals, allocation rounding;
//   - one non-blocking stream for every op and copy; synchronize() waits for it;
//   - GEMMs through cuBLASLt (cublaslt_gemm.cuh) with a workspace booked under
//     Account::kWorkspace: 32 MiB on sm_90 and newer, 4 MiB before (the sizes
//     the cuBLAS documentation recommends for Hopper and for earlier GPUs).
// Made by make_cuda_device (make_cuda_device.h), the registry's entry point.
#pragma once
#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "kernels/cuda/cublaslt_gemm.cuh"
#include "kernels/cuda/simt_device.cuh"

namespace gpuledger {
inline namespace cuda_backend {

class CudaDevice : public SimtDevice {
 public:
  // Binds to GPU device_index (cudaSetDevice) and creates the stream, the pool
  // and the cuBLASLt handle and workspace.
  CudaDevice(Ledger& ledger, int device_index);
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  std::string name() const override { return "cuda"; }
  std::string description() const override { return description_; }
  MemoryInfo memory_info() const override;

  void copy_to_host(void* host_dst, const void* src, int64_t bytes) override;
  void copy_from_host(void* dst, const void* host_src, int64_t bytes) override;
  void copy(void* dst, const void* src, int64_t bytes) override;
  void fill_zero(void* dst, int64_t bytes) override;
  void synchronize() override;
  // A cudaEvent pair on the stream: GPU time (cuda_event_timer.cu).
  std::unique_ptr<DeviceTimer> start_timer() override;

  // The stream every op and copy runs on, public for the NCCL comm
  // (comm/nccl_comm.cpp), which orders its collectives against it.
  using SimtDevice::stream;

 protected:
  void gemm_impl(const GemmArgs& g) override;
  void* raw_alloc(int64_t bytes) override;
  void raw_free(void* p, int64_t bytes) override;
  void* raw_alloc_host(int64_t bytes) override;
  void raw_free_host(void* p, int64_t bytes) override;

 private:
  void release_resources() noexcept;

  int device_ = 0;
  cudaMemPool_t pool_ = nullptr;
  std::string description_;
  std::unique_ptr<CublasLtGemm> gemm_;
};

}  // namespace cuda_backend
}  // namespace gpuledger
