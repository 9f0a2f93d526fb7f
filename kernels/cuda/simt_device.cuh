// SimtDevice: the op table of device.h as CUDA kernels (each op's <op>_impl),
// except the GEMM and memory, which belong to the concrete backend. CudaDevice
// (cuda_device.cuh) adds device memory, a stream and cuBLASLt GEMMs; the
// test-only EmuDevice (tests/gpu) adds host memory and runs these very kernels
// on the CPU emulator. Each op has the semantics of the CPU reference
// (kernels/cpu/ops_*.cpp): same masks, same Philox draws, same rounding points
// (fp32 compute, one rounding to the storage dtype).
//
// The op bodies live beside their kernels, one file per family as on the CPU:
// ops_elementwise.cu, ops_norm.cu, ops_embedding.cu, ops_loss.cu,
// ops_optim.cu, ops_attention.cu, ops_rope.cu, ops_dropout.cu,
// ops_activation.cu, ops_flash.cu, ops_kv_cache.cu, ops_vocab_parallel.cu.
//
// Temporaries an op needs (column-sum partials, grouping tables, reduction
// partials, flash's D_i) are allocated through Device::alloc under
// Account::kWorkspace, so the ledger sees them; they are freed when the op
// returns (stream-ordered on CUDA, so a kernel still running keeps them valid).
#pragma once
#include <cstdint>

#include "kernels/cuda/simt.cuh"
#include "kernels/device.h"

namespace gpuledger {
inline namespace GPL_SIMT_NAMESPACE {

class SimtDevice : public Device {
 public:
  explicit SimtDevice(Ledger& ledger) : Device(ledger) {}

 protected:
  // Every op of the table but the GEMM (generated: scripts/gen_profiling_device.py).
#include "kernels/device_op_overrides.inc"
  // The stream every kernel is launched on (nullptr: the default stream; the
  // emulator ignores it).
  cudaStream_t stream() const { return stream_; }
  // C_i (m×n, ldc) = beta·C_i for i < batch (stride_c elements apart); beta == 0
  // writes zeros without reading C (BLAS semantics). The GEMM's k == 0 or
  // alpha == 0 case. In ops_elementwise.cu.
  void scale_matrices(void* c, DType t, int64_t m, int64_t n, int64_t ldc, int64_t stride_c, int64_t batch, float beta);

  cudaStream_t stream_ = nullptr;
  // The most dynamic shared memory one block may use (the device's opt-in
  // limit); flash attention checks its tiles against it.
  int64_t max_smem_per_block_bytes_ = 48 * 1024;
};

}  // namespace GPL_SIMT_NAMESPACE
}  // namespace gpuledger
