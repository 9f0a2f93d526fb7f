// Tensor and sequence parallelism: the meta simulation of every rank of a
// Layout{tp = 2, 4} (make_sim_groups + MetaDevice, one process) books exactly
// the analytic per-rank budget (analytic/budget.h, written
// independently from docs/exact-budget.md) in every account but workspace,
// and its Comm counters equal rank_comm_per_step (docs/formulas/comm.md) key
// by key, calls and bytes — over flavours, --sp, recompute, attention kinds,
// dtypes and dropout. tests/parallel/mpi/test_tp_training.cpp checks that the
// real MPI ranks book what this simulation books, so the real ranks match
// the analytic side too.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "analytic/budget.h"
#include "analytic/comm_volume.h"
#include "comm_expect.h"
#include "core/model_config.h"
#include "kernels/ledger.h"
#include "kernels/meta/meta_device.h"
#include "parallel/groups.h"
#include "parallel/train_step.h"

namespace gpuledger {
namespace {

struct Point {
  std::string model;
  int64_t tp;
  bool sp;
  Recompute recompute;
  AttentionKind attention;
  DType dtype;
  double dropout;
};

void check_point(const Point& p) {
  const ModelConfig m = load_model(p.model);
  RunConfig r;
  r.seq = 16;
  r.mbs = 2;
  r.microbatches = 2;
  r.recompute = p.recompute;
  r.attention = p.attention;
  r.dtype = p.dtype;
  r.dropout = p.dropout;
  Layout l;
  l.tp = p.tp;
  l.sp = p.sp;
  for (int64_t rank = 0; rank < p.tp; ++rank) {
    SCOPED_TRACE(p.model + " tp " + std::to_string(p.tp) + (p.sp ? " sp" : "") + " " +
                 std::string(recompute_name(p.recompute)) + " " + std::string(attention_name(p.attention)) + " " +
                 std::string(dtype_name(p.dtype)) + " p " + std::to_string(p.dropout) + " rank " +
                 std::to_string(rank));
    Ledger ledger;
    MetaDevice dev(ledger);
    CommCounters counters;
    Groups g = make_sim_groups(l, rank, counters, dev, m.tied_embeddings);
    Trainer trainer(dev, m, r, g.context());
    counters.reset();
    trainer.step(0);
    const auto budget = analytic::rank_budget(m, l, r, rank);
    for (Account a : kAllAccounts) {
      if (a == Account::kWorkspace) continue;
      EXPECT_EQ(ledger.peak_by_account()[a], budget.exact[a]) << account_name(a);
    }
    const auto want = analytic::rank_comm_per_step(m, l, r, rank);
    testing::expect_comm_equals(counters.by_key(), want);
  }
}

TEST(TpBudget, MetaRanksMatchTheAnalyticBudgetAndComm) {
  for (const char* model : {"tiny-gpt", "tiny-llama"})
    for (int64_t tp : {2, 4})
      for (bool sp : {false, true})
        for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull})
          for (AttentionKind at : {AttentionKind::kMaterialized, AttentionKind::kFlash})
            for (DType dt : {DType::kBF16, DType::kFP32})
              for (double p : {0.0, 0.1}) check_point({model, tp, sp, rc, at, dt, p});
}

}  // namespace
}  // namespace gpuledger
