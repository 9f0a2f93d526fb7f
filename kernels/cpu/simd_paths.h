// One body of hand-vectorized loops compiled once per instruction-set path
// (cpu_isa.h), each copy in its own namespace. The including file defines
//   GPL_SIMD_BODY          the body's header, a quoted include path
//   GPL_SIMD_NS_AVX2       the namespace of the AVX2+FMA+F16C copy
//   GPL_SIMD_NS_PORTABLE   the namespace of the baseline copy
// and includes this header once, at file scope: the copies are
// gpuledger::GPL_SIMD_NS_AVX2 and gpuledger::GPL_SIMD_NS_PORTABLE. The AVX2 copy is
// compiled under `#pragma GCC target("avx2,fma,f16c")` between push_options
// and pop_options, so the target never reaches code after it (a unity build
// may append other files); the body sees GPL_SIMD_AVX2 set there and uses
// the intrinsics of <immintrin.h>. No include guard: each kernel file
// includes it for its own body.
#include "kernels/cpu/cpu_isa.h"

#ifdef GPL_CPU_HAVE_AVX2_PATH
#include <immintrin.h>
#endif

// 32-byte vectors without AVX (the portable copy): GCC warns, at the end of the
// file, that passing them by value changes the ABI. Every such function is
// inlined into the body's entry points, so no call crosses an ABI boundary.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace gpuledger {

#ifdef GPL_CPU_HAVE_AVX2_PATH
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
namespace GPL_SIMD_NS_AVX2 {
#define GPL_SIMD_AVX2 1
#include GPL_SIMD_BODY
#undef GPL_SIMD_AVX2
}  // namespace GPL_SIMD_NS_AVX2
#pragma GCC pop_options
#endif

namespace GPL_SIMD_NS_PORTABLE {
#include GPL_SIMD_BODY
}  // namespace GPL_SIMD_NS_PORTABLE

}  // namespace gpuledger

#undef GPL_SIMD_BODY
#undef GPL_SIMD_NS_AVX2
#undef GPL_SIMD_NS_PORTABLE
