// The CPU thread policy (kernels/cpu/thread_policy.h): once a CPU device
// exists, the OpenMP pool owns the cores and the BLAS runs one thread per call.
#include "kernels/cpu/thread_policy.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "kernels/cpu/cpu_device.h"

#if GPULEDGER_HAVE_BLAS
extern "C" int openblas_get_num_threads(void);
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

namespace gpuledger {
namespace {

TEST(CpuThreadPolicy, OpenMpOwnsTheCoresAndTheBlasRunsOneThreadPerCall) {
  if (std::getenv("GPULEDGER_THREAD_POLICY")) GTEST_SKIP() << "GPULEDGER_THREAD_POLICY is set in this environment";
  Ledger ledger;
  CpuDevice dev(ledger);
  const CpuThreadPolicy& p = apply_cpu_thread_policy();
  EXPECT_TRUE(p.applied);
  EXPECT_EQ(p.blas_threads, 1);
#if GPULEDGER_HAVE_BLAS
  EXPECT_EQ(openblas_get_num_threads(), 1);  // what the library itself now reports
#endif
#ifdef _OPENMP
  EXPECT_EQ(p.openmp_threads, omp_get_max_threads());
#endif
  const std::string want = "OpenMP owns " + std::to_string(p.openmp_threads) +
                           (p.openmp_threads == 1 ? " thread" : " threads") +
                           "; BLAS 1 thread per call, GEMMs split by OpenMP";
  EXPECT_EQ(p.describe(), want);
  EXPECT_NE(dev.description().find(want), std::string::npos) << dev.description();
  EXPECT_EQ(&apply_cpu_thread_policy(), &p);  // once per process
}

}  // namespace
}  // namespace gpuledger
