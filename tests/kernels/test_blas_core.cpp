// The BLAS core check (kernels/cpu/blas_core.h): OpenBLAS core names to ISA
// levels, the verdict for a core narrower than the CPU and the coretype it
// suggests, and what the binary does about it (re-execute or warn) for each
// state of the environment.
#include <gtest/gtest.h>

#include "kernels/cpu/blas_core.h"

namespace gpuledger {
namespace {

TEST(BlasCore, CoreNamesMapToTheirKernelsIsa) {
  EXPECT_EQ(blas_core_isa_level("Prescott"), IsaLevel::kSse);
  EXPECT_EQ(blas_core_isa_level("CORE2"), IsaLevel::kSse);
  EXPECT_EQ(blas_core_isa_level("Nehalem"), IsaLevel::kSse);
  EXPECT_EQ(blas_core_isa_level("Sandybridge"), IsaLevel::kAvx);
  EXPECT_EQ(blas_core_isa_level("Haswell"), IsaLevel::kAvx2);
  EXPECT_EQ(blas_core_isa_level("Zen"), IsaLevel::kAvx2);
  EXPECT_EQ(blas_core_isa_level("SkylakeX"), IsaLevel::kAvx512);
  EXPECT_EQ(blas_core_isa_level("SapphireRapids"), IsaLevel::kAvx512);
  EXPECT_EQ(blas_core_isa_level("NeoverseV2"), IsaLevel::kUnknown);
  EXPECT_EQ(blas_core_isa_level("built-in"), IsaLevel::kUnknown);
}

TEST(BlasCore, APrescottCoreOnAnAvx512CpuSuggestsSkylakeX) {
  const BlasCoreCheck c = check_blas_core("Prescott", IsaLevel::kAvx512);
  ASSERT_TRUE(c.narrower());
  EXPECT_EQ(*c.suggested, "SkylakeX");
  EXPECT_EQ(c.describe(),
            "OpenBLAS core Prescott (sse kernels) on an avx512 CPU: OPENBLAS_CORETYPE=SkylakeX runs kernels as wide as "
            "the CPU");
  EXPECT_EQ(*check_blas_core("Nehalem", IsaLevel::kAvx2).suggested, "Haswell");
  EXPECT_EQ(*check_blas_core("Core2", IsaLevel::kAvx).suggested, "Sandybridge");
  // As wide as the CPU, wider (a forced core), or not known: nothing to say.
  EXPECT_FALSE(check_blas_core("Zen", IsaLevel::kAvx2).narrower());
  EXPECT_FALSE(check_blas_core("SkylakeX", IsaLevel::kAvx2).narrower());
  EXPECT_FALSE(check_blas_core("NeoverseV2", IsaLevel::kAvx512).narrower());
  EXPECT_FALSE(check_blas_core("Prescott", IsaLevel::kUnknown).narrower());
  EXPECT_FALSE(check_blas_core("Prescott", IsaLevel::kSse).narrower());
}

TEST(BlasCore, ReexecutesOnlyWhenNothingSaysOtherwise) {
  const BlasCoreCheck narrow = check_blas_core("Prescott", IsaLevel::kAvx512);
  const BlasCoreAction go = decide_blas_core_action(narrow, nullptr, nullptr, nullptr);
  ASSERT_TRUE(go.reexec_with.has_value());
  EXPECT_EQ(*go.reexec_with, "SkylakeX");
  EXPECT_TRUE(go.warning.empty());
  EXPECT_TRUE(decide_blas_core_action(narrow, "", nullptr, nullptr).reexec_with.has_value());  // empty = unset

  const BlasCoreAction user = decide_blas_core_action(narrow, "Prescott", nullptr, nullptr);
  EXPECT_FALSE(user.reexec_with.has_value());
  EXPECT_NE(user.warning.find("OPENBLAS_CORETYPE=Prescott is set: kept"), std::string::npos) << user.warning;
  const BlasCoreAction keep = decide_blas_core_action(narrow, nullptr, "keep", nullptr);
  EXPECT_FALSE(keep.reexec_with.has_value());
  EXPECT_NE(keep.warning.find("GPULEDGER_BLAS_CORETYPE=keep"), std::string::npos);
  // The re-executed process whose BLAS still picked a narrow core: no loop, a warning.
  const BlasCoreAction again = decide_blas_core_action(narrow, nullptr, nullptr, "1");
  EXPECT_FALSE(again.reexec_with.has_value());
  EXPECT_NE(again.warning.find("did not change the core"), std::string::npos);

  const BlasCoreAction fine =
      decide_blas_core_action(check_blas_core("Zen", IsaLevel::kAvx2), nullptr, nullptr, nullptr);
  EXPECT_FALSE(fine.reexec_with.has_value());
  EXPECT_TRUE(fine.warning.empty());
}

}  // namespace
}  // namespace gpuledger
