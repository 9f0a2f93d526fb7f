// kv_row_ops.h: the row operations compiled once per ISA (kv_row_ops_body.h).
#include "kernels/cpu/kv_row_ops.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "core/dtype.h"

// kv_rows_avx2::… and kv_rows_portable::… (row_dot, row_axpy, exp_shifted_sum, exp_all).
#define GPL_SIMD_BODY "kernels/cpu/kv_row_ops_body.h"
#define GPL_SIMD_NS_AVX2 kv_rows_avx2
#define GPL_SIMD_NS_PORTABLE kv_rows_portable
#include "kernels/cpu/simd_paths.h"

namespace gpuledger {

const KvRowOps& kv_row_ops(CpuIsa isa) {
  if (!cpu_supports(isa)) throw std::invalid_argument(std::string("kv_row_ops: this CPU lacks ") + cpu_isa_name(isa));
#ifdef GPL_CPU_HAVE_AVX2_PATH
  static const KvRowOps avx2{kv_rows_avx2::row_dot, kv_rows_avx2::row_axpy, kv_rows_avx2::exp_shifted_sum,
                             kv_rows_avx2::exp_all};
  if (isa == CpuIsa::kAvx2) return avx2;
#endif
  static const KvRowOps portable{kv_rows_portable::row_dot, kv_rows_portable::row_axpy,
                                 kv_rows_portable::exp_shifted_sum, kv_rows_portable::exp_all};
  return portable;
}

}  // namespace gpuledger
