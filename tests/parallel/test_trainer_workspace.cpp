// The workspace account (docs/exact-budget.md "Workspace") is backend-specific
// and has only an analytic upper bound (analytic/budget.h
// workspace_bound_bytes): the CPU run's workspace peak must stay within it,
// and meta (which allocates no GEMM conversion buffers) books no more than the
// CPU. Over the same matrix as test_trainer_ledger.cpp; a point over the bound
// is reported with its figures, never hidden.
#include <gtest/gtest.h>

#include "analytic/budget.h"
#include "ledger_matrix.h"

namespace gpuledger {
namespace {

using testing::ledger_matrix;
using testing::measure;
using testing::Measured;
using testing::Point;

class TrainerWorkspace : public ::testing::TestWithParam<Point> {};

TEST_P(TrainerWorkspace, WithinTheAnalyticBound) {
  const Point& p = GetParam();
  const Measured& got = measure(p);
  const auto budget = analytic::rank_budget(load_model(p.model), Layout{}, p.run(), 0);
  EXPECT_LE(got.cpu_peak[Account::kWorkspace], budget.exact[Account::kWorkspace])
      << "cpu workspace peak exceeds the analytic upper bound by "
      << got.cpu_peak[Account::kWorkspace] - budget.exact[Account::kWorkspace] << " bytes ("
      << static_cast<double>(got.cpu_peak[Account::kWorkspace]) / budget.exact[Account::kWorkspace] << "x)";
  EXPECT_LE(got.meta_peak[Account::kWorkspace], got.cpu_peak[Account::kWorkspace])
      << "meta allocates no GEMM conversion buffers, so it books no more than cpu";
}

INSTANTIATE_TEST_SUITE_P(Tiny, TrainerWorkspace, ::testing::ValuesIn(ledger_matrix()),
                         [](const auto& info) { return info.param.name(); });

}  // namespace
}  // namespace gpuledger
