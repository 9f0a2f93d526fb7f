// The NCCL comm's dtype, reduction and aliasing rules (see nccl_rules.h).
#include "comm/nccl_rules.h"

namespace gpuledger {
namespace {

// Whether the byte ranges [a, a + a_bytes) and [b, b + b_bytes) share a byte.
bool overlap(const void* a, int64_t a_bytes, const void* b, int64_t b_bytes) {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  if (a_bytes <= 0 || b_bytes <= 0) return false;
  return x < y + static_cast<uintptr_t>(b_bytes) && y < x + static_cast<uintptr_t>(a_bytes);
}

}  // namespace

ncclDataType_t nccl_dtype(DType t) {
  switch (t) {
    case DType::kBF16: return ncclBfloat16;
    case DType::kFP16: return ncclFloat16;
    case DType::kFP32: return ncclFloat32;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_red_op(ReduceOp op) { return op == ReduceOp::kMax ? ncclMax : ncclSum; }

NcclAliasing all_gather_aliasing(const void* out, const void* in, int64_t n_bytes, int64_t rank, int64_t size) {
  if (in == static_cast<const char*>(out) + rank * n_bytes) return NcclAliasing::kInPlace;
  return overlap(out, n_bytes * size, in, n_bytes) ? NcclAliasing::kStaged : NcclAliasing::kDistinct;
}

NcclAliasing reduce_scatter_aliasing(const void* out, const void* in, int64_t n_bytes, int64_t rank, int64_t size) {
  if (out == static_cast<const char*>(in) + rank * n_bytes) return NcclAliasing::kInPlace;
  return overlap(in, n_bytes * size, out, n_bytes) ? NcclAliasing::kStaged : NcclAliasing::kDistinct;
}

}  // namespace gpuledger
