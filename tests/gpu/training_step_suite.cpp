// Whole training steps on the backend under test against the CPU reference
// (the CUDA backend's contract: the ledger of a cuda run equals the ledger of the
// cpu run of the same configuration, to the byte, in every account but the
// backend-specific workspace). A one-rank Trainer runs the same seeded steps
// on both devices; checked: every account's peak but workspace equal to the
// byte, the executed GEMM FLOPs equal to the FLOP, and the losses and gradient
// norms of every step within a per-dtype tolerance (fp32: 1e-4 relative —
// tf32 GEMMs on the GPU; 16-bit: 2e-2, the rounding of a different order of
// accumulation). Linked into test_backend_ops (the GPU) and
// test_simt_emulated (the CUDA kernels on the CPU emulator), like
// backend_ops_suite.cpp, whose backend() it uses.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "core/model_config.h"
#include "core/run_config.h"
#include "kernels/device.h"
#include "kernels/ledger.h"
#include "parallel/train_step.h"
#include "tests/gpu/backend_ops_suite.h"
#include "tests/parallel/trainer_rig.h"

namespace gpuledger::backend_test {
namespace {

// n seeded steps of a one-rank Trainer on a device (tests/parallel/trainer_rig.h).
std::vector<StepResult> run_steps(testing::TrainerRig& rig, int64_t n) {
  std::vector<StepResult> out;
  for (int64_t k = 0; k < n; ++k) out.push_back(rig.trainer->step(k));
  return out;
}

struct Case {
  const char* model;
  DType dtype;
  AttentionKind attention;
  Recompute recompute;
  double dropout;
};

std::string case_name(const Case& c) {
  std::string name = std::string(c.model) + "_" + std::string(dtype_name(c.dtype)) + "_" +
                     std::string(attention_name(c.attention)) + "_" + std::string(recompute_name(c.recompute)) +
                     (c.dropout > 0 ? "_dropout" : "");
  for (char& ch : name)
    if (ch == '-') ch = '_';  // gtest names: letters, digits, underscores
  return name;
}

class TrainingStep : public ::testing::TestWithParam<Case> {};

TEST_P(TrainingStep, LedgerFlopsAndLossEqualTheCpuRun) {
  const Case& c = GetParam();
  const ModelConfig m = load_model(c.model);
  RunConfig r;
  r.seq = 16;
  r.mbs = 2;
  r.microbatches = 2;
  r.dtype = c.dtype;
  r.grad_dtype = c.dtype == DType::kFP32 ? DType::kFP32 : DType::kBF16;
  r.attention = c.attention;
  r.recompute = c.recompute;
  r.dropout = c.dropout;
  r.lr = 1e-2;
  const int64_t n_steps = 2;
  testing::TrainerRig cpu("cpu", m, r), dut(backend().make, m, r);
  const auto cpu_steps = run_steps(cpu, n_steps), dut_steps = run_steps(dut, n_steps);
  for (Account a : kAllAccounts) {
    if (a == Account::kWorkspace) continue;
    EXPECT_EQ(dut.ledger.peak(a), cpu.ledger.peak(a)) << account_name(a);
  }
  const double tol = c.dtype == DType::kFP32 ? 1e-4 : 2e-2;
  for (int64_t k = 0; k < n_steps; ++k) {
    const StepResult &x = dut_steps[static_cast<size_t>(k)], &y = cpu_steps[static_cast<size_t>(k)];
    EXPECT_EQ(x.executed_flops, y.executed_flops) << "step " << k;
    EXPECT_NEAR(x.loss, y.loss, tol * std::abs(y.loss)) << "step " << k;
    EXPECT_NEAR(x.grad_norm, y.grad_norm, tol * std::abs(y.grad_norm) + 1e-6) << "step " << k;
  }
  // the loss moved: the step trained something (same on both)
  EXPECT_NE(cpu_steps[0].loss, cpu_steps[1].loss);
}

INSTANTIATE_TEST_SUITE_P(
    Tiny, TrainingStep,
    ::testing::Values(Case{"tiny-llama", DType::kFP32, AttentionKind::kMaterialized, Recompute::kNone, 0.0},
                      Case{"tiny-llama", DType::kBF16, AttentionKind::kFlash, Recompute::kSelective, 0.0},
                      Case{"tiny-gpt", DType::kFP32, AttentionKind::kFlash, Recompute::kFull, 0.1},
                      Case{"tiny-gpt", DType::kBF16, AttentionKind::kMaterialized, Recompute::kNone, 0.1}),
    [](const auto& info) { return case_name(info.param); });

}  // namespace
}  // namespace gpuledger::backend_test
