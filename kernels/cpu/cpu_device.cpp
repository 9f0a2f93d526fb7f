// CpuDevice: construction, description (BLAS build and thread counts), and
// host memory: 64-byte aligned allocations (one cache line, and the widest
// AVX-512 load), copies and zero fills. The ops live in the ops_*.cpp files.
#include "kernels/cpu/cpu_device.h"

#include "kernels/cpu/thread_policy.h"

#include <cstdlib>
#include <cstring>
#include <string>

#if GPULEDGER_HAVE_BLAS
#include <cblas.h>
// OpenBLAS extensions; declared again here in case the cblas.h found is a
// generic one (an identical redeclaration is harmless when it is OpenBLAS's).
extern "C" char* openblas_get_config(void);
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

namespace gpuledger {

namespace {
constexpr int64_t kAlignBytes = 64;
}

CpuDevice::CpuDevice(Ledger& ledger) : Device(ledger) { apply_cpu_thread_policy(); }

std::string CpuDevice::description() const {
  std::string d = "CPU";
#if GPULEDGER_HAVE_BLAS
  // e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY SapphireRapids MAX_THREADS=64"
  d += ", ";
  d += openblas_get_config();
#else
  d += ", built-in GEMM (no BLAS)";
#endif
#ifdef _OPENMP
  d += ", " + apply_cpu_thread_policy().describe();
#else
  d += ", 1 thread (no OpenMP)";
#endif
  return d;
}

void* CpuDevice::raw_alloc(int64_t bytes) {
  // aligned_alloc wants a size that is a multiple of the alignment, and a
  // zero-byte request must still give a unique pointer to free later. The
  // ledger books the requested bytes; the rounding is the allocator's slack.
  const int64_t rounded = ((bytes > 0 ? bytes : 1) + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
  return std::aligned_alloc(kAlignBytes, static_cast<size_t>(rounded));
}

void CpuDevice::raw_free(void* p, int64_t bytes) { std::free(p); }

void CpuDevice::copy_to_host(void* host_dst, const void* src, int64_t bytes) {
  if (bytes > 0) std::memcpy(host_dst, src, static_cast<size_t>(bytes));
}

void CpuDevice::copy_from_host(void* dst, const void* host_src, int64_t bytes) {
  if (bytes > 0) std::memcpy(dst, host_src, static_cast<size_t>(bytes));
}

void CpuDevice::copy(void* dst, const void* src, int64_t bytes) {
  // memmove: a device-to-device copy within one buffer may overlap.
  if (bytes > 0) std::memmove(dst, src, static_cast<size_t>(bytes));
}

void CpuDevice::fill_zero(void* dst, int64_t bytes) {
  if (bytes > 0) std::memset(dst, 0, static_cast<size_t>(bytes));
}

}  // namespace gpuledger
