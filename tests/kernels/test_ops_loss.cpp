// Cross-entropy on the CPU backend: forward against a double-precision
// log-sum-exp, with padded vocabulary columns (holding large values that
// would dominate if they were counted) and logits near 1000 (exp overflows
// fp32 without the max shift); backward against central finite differences
// of scale·Σ losses (tolerances: tests/kernels/grad_check.h), padding columns
// exactly 0, in place; invalid arguments rejected.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/cpu_device.h"
#include "tests/kernels/grad_check.h"

namespace gpuledger {
namespace {

using testing_util::random_uniform;

struct Dev {
  Ledger ledger;
  CpuDevice d{ledger};
};

constexpr int64_t N = 6, V = 50, Vp = 64;

std::vector<float> make_logits() {
  auto x = random_uniform(N * Vp, -5, 5, 1);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = V; j < Vp; ++j) x[i * Vp + j] = 100.0f;  // padding: must be ignored
  for (int64_t j = 0; j < V; ++j) x[2 * Vp + j] += 1000.0f;   // exp(1000) overflows
  return x;
}
const std::vector<int32_t> kTargets = {0, 49, 17, 3, 3, 25};

TEST(CrossEntropy, ForwardMatchesDoubleLogSumExp) {
  Dev dev;
  const auto x = make_logits();
  std::vector<float> losses(N);
  dev.d.cross_entropy_forward(losses.data(), x.data(), kTargets.data(), N, Vp, V);
  for (int64_t i = 0; i < N; ++i) {
    double mx = -1e300;
    for (int64_t j = 0; j < V; ++j) mx = std::max(mx, static_cast<double>(x[i * Vp + j]));
    double s = 0;
    for (int64_t j = 0; j < V; ++j) s += std::exp(x[i * Vp + j] - mx);
    const double ref = mx + std::log(s) - x[i * Vp + kTargets[i]];
    // fp32 exp (1 ulp) in a double sum, one fp32 rounding of the result; the
    // max shift is exact (Sterbenz) for the row near 1000.
    EXPECT_NEAR(losses[i], ref, 1e-5 * (1 + std::abs(ref))) << i;
    EXPECT_TRUE(std::isfinite(losses[i]));
  }
}

TEST(CrossEntropy, BackwardMatchesFiniteDifferences) {
  Dev dev;
  auto x = make_logits();
  const float scale = 1.0f / N;  // the mean over tokens
  std::vector<float> losses(N);
  auto loss = [&]() {
    dev.d.cross_entropy_forward(losses.data(), x.data(), kTargets.data(), N, Vp, V);
    double s = 0;
    for (float l : losses) s += l;
    return scale * s;
  };
  std::vector<float> dx(N * Vp, std::numeric_limits<float>::quiet_NaN());  // all overwritten
  dev.d.cross_entropy_backward(dx.data(), x.data(), kTargets.data(), N, Vp, V, scale);
  // Perturbing one logit changes one row's loss, an fp32 value of O(5) (the
  // max shift is exact, also for the row near 1000): noise ≈ 6e-8·5/1e-2 ≈ 3e-5
  // absolute against gradients up to scale ≈ 0.17, i.e. ≈ 2e-4 relative.
  EXPECT_LT(testing_util::max_rel_error(dx, testing_util::numeric_grad(x, loss)), 1e-3);
  for (int64_t i = 0; i < N; ++i) {
    double row_sum = 0;  // Σ_j (softmax − onehot) = 0
    for (int64_t j = 0; j < V; ++j) row_sum += dx[i * Vp + j];
    EXPECT_NEAR(row_sum, 0.0, 1e-6);
    for (int64_t j = V; j < Vp; ++j) EXPECT_EQ(dx[i * Vp + j], 0.0f);  // padding: exactly 0
  }
  // In place gives the same values.
  auto inplace = x;
  dev.d.cross_entropy_backward(inplace.data(), inplace.data(), kTargets.data(), N, Vp, V, scale);
  EXPECT_EQ(inplace, dx);
}

TEST(CrossEntropy, UnpaddedVocabulary) {
  Dev dev;
  // V = Vp = 3 with logits (0, ln 2, ln 5): softmax (1/8, 2/8, 5/8).
  const std::vector<float> x = {0.0f, std::log(2.0f), std::log(5.0f)};
  const std::vector<int32_t> t = {2};
  float loss = 0;
  dev.d.cross_entropy_forward(&loss, x.data(), t.data(), 1, 3, 3);
  EXPECT_NEAR(loss, std::log(8.0 / 5.0), 1e-6);
  std::vector<float> dx(3);
  dev.d.cross_entropy_backward(dx.data(), x.data(), t.data(), 1, 3, 3, 2.0f);
  EXPECT_NEAR(dx[0], 2.0 * (1.0 / 8), 1e-6);
  EXPECT_NEAR(dx[1], 2.0 * (2.0 / 8), 1e-6);
  EXPECT_NEAR(dx[2], 2.0 * (5.0 / 8 - 1), 1e-6);
}

TEST(CrossEntropy, RejectsTargetsOutsideTheVocabulary) {
  Dev dev;
  const auto x = make_logits();
  std::vector<float> losses(N), dx(N * Vp);
  auto bad = kTargets;
  bad[4] = V;  // a padding column is not a token
  EXPECT_THROW(dev.d.cross_entropy_forward(losses.data(), x.data(), bad.data(), N, Vp, V), std::invalid_argument);
  bad[4] = -1;
  EXPECT_THROW(dev.d.cross_entropy_backward(dx.data(), x.data(), bad.data(), N, Vp, V, 1.0f), std::invalid_argument);
  EXPECT_THROW(dev.d.cross_entropy_forward(losses.data(), x.data(), kTargets.data(), N, V, Vp),
               std::invalid_argument);  // V > Vp
}

}  // namespace
}  // namespace gpuledger
