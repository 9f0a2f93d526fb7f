// kv_row_ops.h: the row operations compiled once per ISA (kv_row_ops_body.h).
#include "kernels/cpu/kv_row_ops.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "core/dtype.h"

#ifdef GPL_CPU_HAVE_AVX2_PATH
#include <immintrin.h>
#endif

// 32-byte vectors without AVX (the portable path): GCC warns, at the end of the
// file, that passing them by value changes the ABI. Every such function is
// inlined into the row operations, so no call crosses an ABI boundary.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace gpuledger {

#ifdef GPL_CPU_HAVE_AVX2_PATH
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
namespace kv_rows_avx2 {
#define GPL_SIMD_AVX2 1
#include "kernels/cpu/kv_row_ops_body.h"
#undef GPL_SIMD_AVX2
}  // namespace kv_rows_avx2
#pragma GCC pop_options
#endif

namespace kv_rows_portable {
#include "kernels/cpu/kv_row_ops_body.h"
}  // namespace kv_rows_portable

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
