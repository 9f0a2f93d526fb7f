// ZeRO-Offload of the optimizer (--offload optimizer; parallel/zero/optimizer_offload.h):
//   - every rank of 1- to 4-rank layouts under ZeRO 1, 2 and 3 (meta backend,
//     simulated comm; and the cpu backend) books the analytic budget to the
//     byte in every account but workspace — master and optim 0 on the device,
//     the offloaded bytes in `host` — and its counters hold the analytic
//     copies (copy_d2h@host, copy_h2d@host) call for call and byte for byte
//     beside the collectives;
//   - on one rank of the cpu backend, the losses, gradient norms and weights
//     with offload equal those without it exactly (tolerance 0: the host runs
//     the same CPU update on the same values);
//   - ZeRO 0 with offload is refused, naming the problem.
// tests/parallel/mpi/test_offload_train.cpp runs 2 and 4 real ranks.
#include <gtest/gtest.h>

#include <string>

#include "analytic/budget.h"
#include "analytic/comm_volume.h"
#include "analytic/offload.h"
#include "comm_expect.h"
#include "core/layout.h"
#include "rank_rig.h"

namespace gpuledger {
namespace {

using testing::RankRig;

RunConfig offload_run(DType dt, OptimizerKind opt = OptimizerKind::kAdamW) {
  RunConfig r;
  r.seq = 16;
  r.mbs = 2;
  r.microbatches = 2;
  r.dtype = dt;
  r.grad_dtype = dt == DType::kFP32 ? DType::kFP32 : DType::kBF16;
  r.dropout = 0.1;
  r.bucket_mb = 0.01;
  r.optimizer = opt;
  r.offload_optimizer = true;
  return r;
}

Layout lay(int64_t dp, int64_t pp, int zero) {
  Layout l;
  l.dp = dp;
  l.pp = pp;
  l.zero = zero;
  return l;
}

void expect_budget(RankRig& rig, const ModelConfig& m, const RunConfig& r, const Layout& l, int64_t rank,
                   const std::string& backend) {
  const auto budget = analytic::rank_budget(m, l, r, rank);
  const AccountBytes peak = rig.ledger.peak_by_account();
  for (Account a : kAllAccounts) {
    if (a == Account::kWorkspace) {
      EXPECT_LE(peak[a], budget.exact[a]) << backend;
      continue;
    }
    EXPECT_EQ(peak[a], budget.exact[a]) << backend << " " << account_name(a);
  }
  EXPECT_EQ(peak[Account::kMaster], 0);
  EXPECT_EQ(peak[Account::kOptim], 0);
  EXPECT_GT(peak[Account::kHost], 0);
  // host memory is outside the device peak
  EXPECT_EQ(rig.ledger.peak_total(), rig.ledger.at_peak().device_total());
}

TEST(OptimizerOffload, EveryRankBooksTheAnalyticBytesAndCopies) {
  struct Case {
    const char* model;
    int64_t layers;
    Layout layout;
  };
  for (const Case& c :
       {Case{"tiny-llama", 2, lay(1, 1, 1)}, Case{"tiny-llama", 2, lay(2, 1, 1)}, Case{"tiny-llama", 2, lay(3, 1, 1)},
        Case{"tiny-llama", 2, lay(2, 1, 2)}, Case{"tiny-llama", 2, lay(3, 1, 2)}, Case{"tiny-llama", 2, lay(2, 1, 3)},
        Case{"tiny-llama", 3, lay(3, 1, 3)}, Case{"tiny-llama", 4, lay(2, 2, 1)}, Case{"tiny-llama", 4, lay(2, 2, 3)},
        Case{"tiny-gpt", 2, lay(2, 1, 2)}, Case{"tiny-gpt", 2, lay(4, 1, 3)}})
    for (DType dt : {DType::kBF16, DType::kFP32}) {
      ModelConfig m = load_model(c.model);
      m.layers = c.layers;
      const RunConfig r = offload_run(dt);
      for (int64_t rank = 0; rank < c.layout.world(); ++rank)
        for (const char* backend : {"meta", "cpu"}) {
          SCOPED_TRACE(std::string(c.model) + " dp " + std::to_string(c.layout.dp) + " pp " +
                       std::to_string(c.layout.pp) + " zero " + std::to_string(c.layout.zero) + " " +
                       std::string(dtype_name(dt)) + " rank " + std::to_string(rank) + " " + backend);
          RankRig rig(backend, m, r, c.layout, rank);
          for (int64_t step = 0; step < 2; ++step) {
            rig.counters.reset();
            rig.trainer->step(step);
            testing::expect_comm_equals(rig.counters.by_key(), analytic::rank_comm_per_step(m, c.layout, r, rank));
          }
          expect_budget(rig, m, r, c.layout, rank, backend);
        }
    }
}

// The host bytes by hand for one case: tiny-llama, 1 rank, ZeRO 1, bf16,
// AdamW: every parameter's shard is the whole unit (n = 1), so host = P ×
// (4 master + 8 Adam + 2 gradient copy + 2 weight copy) = 16·P, and each
// step copies 2·P bytes each way in one copy per unit.
TEST(OptimizerOffload, HostBytesAndCopiesByHand) {
  const ModelConfig m = load_model("tiny-llama");
  const RunConfig r = offload_run(DType::kBF16);
  const Layout l = lay(1, 1, 1);
  // tiny-llama's Ψ by hand (h 64, 4 heads and 2 KV heads of 16, ffn 176, V 97,
  // 2 layers, untied): embedding and head 2·97·64 = 12,416; a layer's
  // attention 64·(64 + 2·32) + 64·64 = 12,288, MLP 3·64·176 = 33,792, norms
  // 2·64: 46,208 each; the final norm 64. 12,416 + 2·46,208 + 64 = 104,896.
  const int64_t p = 104896;
  EXPECT_EQ(analytic::offload_host_bytes(m, l, r, 0), 16 * p);
  const auto t = analytic::offload_traffic(m, l, r, 0);
  EXPECT_EQ(t.grad_bytes_to_host, 2 * p);
  EXPECT_EQ(t.param_bytes_to_device, 2 * p);
  RankRig rig("cpu", m, r, l, 0);
  rig.counters.reset();
  rig.trainer->step(0);
  EXPECT_EQ(rig.ledger.peak(Account::kHost), 16 * p);
  EXPECT_EQ(rig.counters.by_key().at("copy_d2h@host").bytes, 2 * p);
  EXPECT_EQ(rig.counters.by_key().at("copy_h2d@host").bytes, 2 * p);
  EXPECT_EQ(rig.counters.by_key().at("copy_d2h@host").calls, t.copies);
}

// One rank, cpu: offload changes where the update runs, not what it computes.
TEST(OptimizerOffload, OneRankTrainsExactlyAsWithoutOffload) {
  const ModelConfig m = load_model("tiny-llama");
  for (DType dt : {DType::kBF16, DType::kFP32})
    for (int zero : {1, 2, 3})
      for (OptimizerKind opt : {OptimizerKind::kAdamW, OptimizerKind::kSGD}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " zero " + std::to_string(zero) + " " +
                     std::string(optimizer_name(opt)));
        RunConfig on = offload_run(dt, opt), off = on;
        off.offload_optimizer = false;
        RankRig a("cpu", m, on, lay(1, 1, zero), 0), b("cpu", m, off, lay(1, 1, zero), 0);
        for (int64_t k = 0; k < 3; ++k) {
          const StepResult ra = a.trainer->step(k), rb = b.trainer->step(k);
          EXPECT_EQ(ra.loss, rb.loss) << "step " << k;
          EXPECT_EQ(ra.grad_norm, rb.grad_norm) << "step " << k;
        }
        EXPECT_EQ(a.trainer->parameters_fp32(), b.trainer->parameters_fp32());
        EXPECT_EQ(a.trainer->gradients_fp32(), b.trainer->gradients_fp32());
      }
}

TEST(OptimizerOffload, ZeroZeroIsRefused) {
  const ModelConfig m = load_model("tiny-llama");
  const RunConfig r = offload_run(DType::kBF16);
  try {
    validate_layout(lay(2, 1, 0), m, r);
    FAIL() << "expected a LayoutError";
  } catch (const LayoutError& e) {
    EXPECT_NE(std::string(e.what()).find("--offload optimizer needs --zero 1, 2 or 3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpuledger
