// The α–β fit recovers the figures that generated its samples, and keeps α ≥ 0.
#include <gtest/gtest.h>

#include <stdexcept>

#include "perf/alpha_beta_fit.h"
#include "perf/collective_time.h"

using namespace gpuledger;
using namespace gpuledger::perf;

namespace {

// Samples of all-reduce, all-gather and send at n = 4 from α and β exactly (collective_seconds).
std::vector<CollectiveSample> exact_samples(double alpha, double beta) {
  NetworkProfile net;
  net.name = "synthetic";
  net.intra_node = LinkFigures{"test", {alpha, "test"}, {beta, "test"}};
  std::vector<CollectiveSample> s;
  for (CommKind k : {CommKind::kAllReduce, CommKind::kAllGather, CommKind::kSend})
    for (int64_t bytes : {int64_t{4096}, int64_t{1} << 20, int64_t{64} << 20})
      s.push_back({k, 4, bytes, collective_seconds(net, k, bytes, 4, LinkClass::kIntraNode)});
  return s;
}

}  // namespace

TEST(AlphaBetaFit, RecoversExactData) {
  const AlphaBetaFit f = fit_alpha_beta(exact_samples(5e-6, 20e9));
  EXPECT_NEAR(f.alpha_seconds, 5e-6, 5e-6 * 1e-9);
  EXPECT_NEAR(f.beta_bytes_per_s, 20e9, 20e9 * 1e-9);
  EXPECT_LT(f.rms_relative_error, 1e-9);
  EXPECT_EQ(f.samples, 9);
}

TEST(AlphaBetaFit, NoisyDataStayClose) {
  auto s = exact_samples(2e-6, 10e9);
  for (size_t i = 0; i < s.size(); ++i) s[i].seconds *= (i % 2 ? 1.05 : 0.95);
  const AlphaBetaFit f = fit_alpha_beta(s);
  EXPECT_NEAR(f.alpha_seconds, 2e-6, 0.2e-6);
  EXPECT_NEAR(f.beta_bytes_per_s, 10e9, 1e9);
  EXPECT_GT(f.rms_relative_error, 0.01);
}

TEST(AlphaBetaFit, NegativeInterceptIsClampedToZero) {
  // t = bytes / 1e9 − 1 µs: a least-squares α would be negative.
  std::vector<CollectiveSample> s;
  for (int64_t bytes : {int64_t{1} << 20, int64_t{8} << 20, int64_t{64} << 20})
    s.push_back({CommKind::kSend, 2, bytes, static_cast<double>(bytes) / 1e9 - 1e-6});
  const AlphaBetaFit f = fit_alpha_beta(s);
  EXPECT_EQ(f.alpha_seconds, 0.0);
  EXPECT_NEAR(f.beta_bytes_per_s, 1e9, 0.01e9);
}

TEST(AlphaBetaFit, RefusesTooFewOrBadSamples) {
  EXPECT_THROW(fit_alpha_beta({{CommKind::kSend, 2, 1024, 1e-6}}), std::invalid_argument);
  EXPECT_THROW(fit_alpha_beta({{CommKind::kSend, 2, 1024, 1e-6}, {CommKind::kSend, 2, 2048, 0.0}}),
               std::invalid_argument);
  EXPECT_THROW(fit_alpha_beta({{CommKind::kCopyToHost, 1, 1024, 1e-6}, {CommKind::kSend, 2, 2048, 1e-6}}),
               std::invalid_argument);
}
