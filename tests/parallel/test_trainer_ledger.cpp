// The training step books exactly the bytes docs/exact-budget.md promises:
// the ledger's peak per account equals the analytic budget
// (analytic/budget.h, written independently from the same page) to the
// byte for weights, grads, master, optim, activations, kv and comm, and the
// GEMM FLOPs executed in a step equal the analytic hardware count exactly,
// over a matrix of flavours, recompute modes, attention kinds, dtypes,
// dropout, shapes, microbatch counts and schedules (pp = 1: GPipe holds all m
// in flight, 1F1B one). The meta backend books the same (all but workspace,
// which is backend-specific) and counts the same FLOPs.
//
// The workspace account (docs/exact-budget.md "Workspace") is backend-specific
// and has only an analytic upper bound (analytic/budget.h
// workspace_bound_bytes): over the same matrix (the same measurements, taken
// once per point in this process), the CPU run's workspace peak must stay
// within it, and meta (which allocates no GEMM conversion buffers) books no
// more than the CPU. A point over the bound is reported with its figures.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>

#include "analytic/budget.h"
#include "ledger_matrix.h"

namespace gpuledger {
namespace {

using testing::ledger_matrix;
using testing::measure;
using testing::Measured;
using testing::Point;

class TrainerLedger : public ::testing::TestWithParam<Point> {};

TEST_P(TrainerLedger, ExactAccountsAndFlopsMatchTheAnalyticBudget) {
  const Point& p = GetParam();
  const Measured& got = measure(p);
  const auto budget = analytic::rank_budget(load_model(p.model), Layout{}, p.run(), 0);
  for (Account a : kAllAccounts) {
    if (a == Account::kWorkspace) continue;
    EXPECT_EQ(got.cpu_peak[a], budget.exact[a]) << "cpu peak of " << account_name(a);
    EXPECT_EQ(got.meta_peak[a], got.cpu_peak[a]) << "meta vs cpu peak of " << account_name(a);
    // a second step books nothing new (no leak, no growth)
    EXPECT_EQ(got.cpu_peak_step2[a], got.cpu_peak[a]) << "second step, " << account_name(a);
  }
  EXPECT_EQ(got.cpu_flops, budget.flops.hardware);
  EXPECT_EQ(got.meta_flops, got.cpu_flops);
  EXPECT_EQ(got.cpu_flops_step2, got.cpu_flops);
  // between steps only the model states are live
  for (const AccountBytes* live : {&got.cpu_live_after, &got.meta_live_after}) {
    EXPECT_EQ((*live)[Account::kActivations], 0);
    EXPECT_EQ((*live)[Account::kWorkspace], 0);
    EXPECT_EQ((*live)[Account::kWeights], budget.exact[Account::kWeights]);
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, TrainerLedger, ::testing::ValuesIn(ledger_matrix()),
                         [](const auto& info) { return info.param.name(); });

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

// GPipe holds every microbatch: its activation peak is m times 1F1B's at pp = 1.
TEST(TrainerLedgerSchedules, GpipeHoldsAllMicrobatches) {
  Point p{"tiny-llama", Recompute::kNone, AttentionKind::kFlash, DType::kBF16, 0.0, 16, 2, 3, Schedule::k1F1B};
  const int64_t one = measure(p).cpu_peak[Account::kActivations];
  p.schedule = Schedule::kGPipe;
  EXPECT_EQ(measure(p).cpu_peak[Account::kActivations], 3 * one);
}

// Published shapes on the meta backend (no memory touched): a 7B Llama at
// seq 4096 and GPT-2 (tied, V = 50257) book exactly the analytic bytes and FLOPs.
TEST(TrainerLedgerMeta, PublishedShapesMatchTheAnalyticBudget) {
  struct Big {
    const char* model;
    Recompute rc;
    AttentionKind at;
    int64_t seq, m;
  };
  for (const Big& big : {Big{"llama2-7b", Recompute::kSelective, AttentionKind::kFlash, 4096, 2},
                         Big{"llama3-8b", Recompute::kFull, AttentionKind::kFlash, 8192, 1},
                         Big{"gpt2", Recompute::kNone, AttentionKind::kMaterialized, 1024, 3}}) {
    SCOPED_TRACE(big.model);
    const ModelConfig m = load_model(big.model);
    RunConfig r;
    r.seq = big.seq;
    r.mbs = 1;
    r.microbatches = big.m;
    r.schedule = Schedule::kGPipe;
    r.recompute = big.rc;
    r.attention = big.at;
    r.dropout = 0.1;
    testing::TrainerRig rig("meta", m, r);
    const StepResult res = rig.trainer->step(0);
    const auto budget = analytic::rank_budget(m, Layout{}, r, 0);
    for (Account a : kAllAccounts) {
      if (a == Account::kWorkspace) continue;
      EXPECT_EQ(rig.ledger.peak(a), budget.exact[a]) << account_name(a);
    }
    EXPECT_EQ(res.executed_flops, budget.flops.hardware);
  }
}

// A memory limit below the step's need: OutOfMemory mid-step, nothing left
// booked in activations or workspace, and a larger limit then runs the step.
TEST(TrainerLedgerLimit, OutOfMemoryMidStepLeavesTheTrainerUsable) {
  const ModelConfig m = load_model("tiny-llama");
  RunConfig r;
  r.seq = 32;
  r.mbs = 2;
  r.microbatches = 2;
  r.schedule = Schedule::kGPipe;
  const auto budget = analytic::rank_budget(m, Layout{}, r, 0);
  const int64_t states = budget.exact[Account::kWeights] + budget.exact[Account::kGrads] +
                         budget.exact[Account::kMaster] + budget.exact[Account::kOptim];
  // room for the states and half the activations: the second forward cannot fit
  testing::TrainerRig rig("meta", m, r, states + budget.exact[Account::kActivations] / 2);
  EXPECT_THROW(rig.trainer->step(0), OutOfMemory);
  EXPECT_EQ(rig.ledger.live(Account::kActivations), 0);
  EXPECT_EQ(rig.ledger.live(Account::kWorkspace), 0);
  EXPECT_EQ(rig.ledger.live_total(), states);
  r.schedule = Schedule::k1F1B;  // one microbatch in flight: fits the same limit
  testing::TrainerRig ok("meta", m, r, states + budget.exact[Account::kActivations] / 2 + (1 << 20));
  EXPECT_NO_THROW(ok.trainer->step(0));
}

// The ledger's timeline carries the step's phases in order.
TEST(TrainerLedgerPhases, MarkersInScheduleOrder) {
  const ModelConfig m = load_model("tiny-gpt");
  RunConfig r;
  r.seq = 8;
  r.mbs = 1;
  r.microbatches = 2;
  r.schedule = Schedule::kGPipe;
  testing::TrainerRig rig("meta", m, r);
  rig.ledger.enable_timeline(true);
  rig.trainer->step(0);
  std::vector<std::string> phases;
  for (const auto& s : rig.ledger.timeline()) phases.push_back(s.phase);
  const std::vector<std::string> want = {"fwd.mb0.embedding", "fwd.mb0.layer0", "fwd.mb0.layer1", "fwd.mb0.head",
                                         "fwd.mb1.embedding", "fwd.mb1.layer0", "fwd.mb1.layer1", "fwd.mb1.head",
                                         "bwd.mb0.head",      "bwd.mb0.layer1", "bwd.mb0.layer0", "bwd.mb0.embedding",
                                         "bwd.mb1.head",      "bwd.mb1.layer1", "bwd.mb1.layer0", "bwd.mb1.embedding",
                                         "optimizer"};
  EXPECT_EQ(phases, want);
}

}  // namespace
}  // namespace gpuledger
