// CpuDevice: the reference backend. Host memory (64-byte aligned), fp32
// compute on 16-bit storage, OpenBLAS sgemm (or the built-in GEMM without
// BLAS), OpenMP threads where they pay. Every other backend is tested against it.
// The op implementations are split by family: cpu_device.cpp (memory, registry
// glue), ops_gemm.cpp, ops_elementwise.cpp, ops_norm.cpp, ops_embedding.cpp,
// ops_loss.cpp, ops_optim.cpp, ops_attention.cpp, ops_flash.cpp,
// ops_rope.cpp, ops_dropout.cpp, ops_activation.cpp; ops_kv_cache_write.cpp and
// ops_cached_attention.cpp (the KV cache of inference), ops_vocab_parallel.cpp
// (vocabulary-parallel embedding and cross-entropy).
#pragma once
#include <string>

#include "kernels/device.h"

namespace gpuledger {

class CpuDevice : public Device {
 public:
  explicit CpuDevice(Ledger& ledger);
  std::string name() const override { return "cpu"; }
  std::string description() const override;
  void copy_to_host(void* host_dst, const void* src, int64_t bytes) override;
  void copy_from_host(void* dst, const void* host_src, int64_t bytes) override;
  void copy(void* dst, const void* src, int64_t bytes) override;
  void fill_zero(void* dst, int64_t bytes) override;

 protected:
  void gemm_impl(const GemmArgs& g) override;
  // Every other op of the table (generated: scripts/gen_profiling_device.py).
#include "kernels/device_op_overrides.inc"
  // FP8 emulation (--dtype fp8): not a table op every backend runs (the default throws).
  void fp8_quantize_dequantize_impl(float* dst, const void* src, DType t, int64_t n, Fp8Format f) override;
  void fp8_quantize_dequantize_blocks_impl(float* dst, const void* src, DType t, int64_t rows, int64_t cols,
                                           int64_t block_rows, int64_t block_cols, Fp8Format f) override;
  void* raw_alloc(int64_t bytes) override;
  void raw_free(void* p, int64_t bytes) override;
};

}  // namespace gpuledger
