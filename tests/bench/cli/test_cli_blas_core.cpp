// CLI test of the BLAS core check (kernels/cpu/blas_core.h, bench/cli/main.cpp):
// a user who forces OpenBLAS onto its SSE3 Prescott kernels on a CPU with AVX
// or wider is told so on stderr, once, and the command still runs; the run
// without the variable says nothing on this machine when OpenBLAS picked a
// core as wide as the CPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "kernels/cpu/blas_core.h"
#include "run_cli.h"

using gpuledger::testing::contains;
using gpuledger::testing::run_cli;

namespace {

TEST(CliBlasCore, AForcedNarrowCoreIsReportedAndKept) {
#if !GPULEDGER_HAVE_BLAS
  GTEST_SKIP() << "built without OpenBLAS";
#else
  const gpuledger::IsaLevel cpu = gpuledger::cpu_isa_level();
  if (cpu < gpuledger::IsaLevel::kAvx) GTEST_SKIP() << "this CPU has no AVX: Prescott's kernels are its width";
  setenv("OPENBLAS_CORETYPE", "Prescott", 1);
  const auto r = run_cli({"models"});
  unsetenv("OPENBLAS_CORETYPE");
  EXPECT_EQ(r.status, 0) << r.err;
  const std::string expect =
      "warning: OpenBLAS core Prescott (sse kernels) on an " + std::string(gpuledger::isa_level_name(cpu)) +
      " CPU: OPENBLAS_CORETYPE=" + *gpuledger::coretype_for(cpu) + " runs kernels as wide as the CPU";
  EXPECT_TRUE(contains(r.err, expect)) << r.err;
  EXPECT_TRUE(contains(r.err, "(OPENBLAS_CORETYPE=Prescott is set: kept)")) << r.err;
  const auto plain = run_cli({"models"});
  EXPECT_EQ(plain.status, 0);
  if (!gpuledger::check_this_blas_core().narrower()) {
    EXPECT_FALSE(contains(plain.err, "OpenBLAS core")) << plain.err;
  }
#endif
}

}  // namespace
