// The CPU thread policy (see thread_policy.h).
#include "kernels/cpu/thread_policy.h"

#include <cstdlib>
#include <stdexcept>

#if GPULEDGER_HAVE_BLAS
// OpenBLAS extensions, declared here in case the cblas.h found is a generic one.
extern "C" void openblas_set_num_threads(int num_threads);
extern "C" int openblas_get_num_threads(void);
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

namespace gpuledger {

std::string CpuThreadPolicy::describe() const {
  if (!applied)
    return std::to_string(openmp_threads) + " OpenMP threads and " + std::to_string(blas_threads) +
           " BLAS threads, each library's own pool (GPULEDGER_THREAD_POLICY=none)";
  return "OpenMP owns " + std::to_string(openmp_threads) + (openmp_threads == 1 ? " thread" : " threads") + "; BLAS " +
         std::to_string(blas_threads) + (blas_threads == 1 ? " thread" : " threads") +
         " per call, GEMMs split by OpenMP";
}

const CpuThreadPolicy& apply_cpu_thread_policy() {
  static const CpuThreadPolicy policy = [] {
    CpuThreadPolicy p;
    const char* env = std::getenv("GPULEDGER_THREAD_POLICY");
    const std::string choice = env ? env : "openmp";
    if (choice != "openmp" && choice != "none")
      throw std::invalid_argument("GPULEDGER_THREAD_POLICY=" + choice + ": expected openmp (the default) or none");
    p.applied = choice == "openmp";
#ifdef _OPENMP
    p.openmp_threads = omp_get_max_threads();
#endif
#if GPULEDGER_HAVE_BLAS
    if (p.applied) openblas_set_num_threads(1);
    p.blas_threads = openblas_get_num_threads();
#endif
    return p;
  }();
  return policy;
}

}  // namespace gpuledger
