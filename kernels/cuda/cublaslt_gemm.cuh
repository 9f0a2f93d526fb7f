// CublasLtGemm: the CUDA backend's GEMM (device.h, GemmArgs) through cuBLASLt.
//   - bf16/fp16 operands accumulate in fp32 (CUBLAS_COMPUTE_32F); fp32
//     operands run on tensor cores as TF32 (CUBLAS_COMPUTE_32F_FAST_TF32: 10-bit
//     mantissa products, fp32 accumulate), as PyTorch does with
//     allow_tf32 — the dense fp32 peak of a datasheet is a TF32 figure;
//   - C in fp32 or in the operands' dtype, alpha/beta in fp32, D written over C;
//   - row-major without copies: C = op(A)·op(B) row-major is Cᵀ = op(B)ᵀ·op(A)ᵀ
//     column-major, so cuBLASLt gets B as its first operand and A as its second,
//     each as stored (a row-major X with leading dimension ld is Xᵀ column-major
//     with the same ld);
//   - strided batches (stride 0 broadcasts one matrix);
//   - one workspace, allocated through Device::alloc under Account::kWorkspace
//     when the backend is made and kept for its life, so the ledger books it;
//   - plans (descriptors, layouts and the heuristic's algorithm) cached per
//     shape, dtype and pointer alignment, so a training step queries the
//     heuristic only once per distinct GEMM.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>

#include "kernels/device.h"

namespace gpuledger {
inline namespace cuda_backend {

class CublasLtGemm {
 public:
  // Allocates `workspace_bytes` through dev.alloc (Account::kWorkspace).
  CublasLtGemm(Device& dev, int64_t workspace_bytes);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  // Runs g (validated by the caller; k > 0, alpha != 0) on `stream`.
  void run(const GemmArgs& g, cudaStream_t stream);

  int64_t workspace_bytes() const { return workspace_.bytes(); }

 private:
  struct Plan;
  using Key = std::array<int64_t, 18>;
  Plan& plan_for(const GemmArgs& g);

  cublasLtHandle_t handle_ = nullptr;
  Buffer workspace_;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace cuda_backend
}  // namespace gpuledger
