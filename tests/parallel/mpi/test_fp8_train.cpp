// --dtype fp8 on real ranks (label mpi): tiny-llama under tp 2 (np 2) and
// dp 2 × tp 2 with ZeRO 1 (np 4), 2 steps, against one rank's fp8 run of the
// same global batch (layout_check.h). Every rank books what its meta
// simulation books in every account but workspace (the FP8 weight copies and
// scaling state included) and makes the same collectives; the meta simulation
// equals the analytic budget (tests/parallel/test_fp8_trainer.cpp).
//
// Tolerance: a TP rank scales its slice of a weight, and of a row-parallel
// GEMM's input, by the slice's own amax (docs/formulas/fp8.md §2), one rank by
// the whole tensor's, so their FP8 images differ by up to half an E4M3 step
// (2⁻⁴ relative) element by element. Loss within 1e-2 relative; weights within
// 2·2⁻⁸ relative + 1e-4 for all but 5% of each tensor's elements and, as Adam's
// normalised step bounds any two runs from the same start, within 2·lr per step.
#include <gtest/gtest.h>

#include "layout_check.h"

namespace gpuledger {
namespace {

using namespace testing;

TEST(Fp8Train, MatchesOneRankAndItsMetaSimulation) {
  RunConfig r = small_run(2, Schedule::k1F1B, DType::kBF16);
  r.dropout = 0.0;
  r.fp8 = Fp8Recipe::kDelayed;
  const Layout l = world_size() == 2 ? mixed(2, 1, 1, 0, false) : mixed(2, 2, 1, 1, false);
  const Tolerance fp8{1e-2, 1e-4, 2.0 / 256, 0.05, 2 * 2 * r.lr + 1e-4};
  check_layout(load_model("tiny-llama"), r, l, 2, fp8);
}

}  // namespace
}  // namespace gpuledger
