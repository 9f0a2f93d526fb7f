// Vocabulary-parallel ops on the CPU backend (device.h, end of the op table),
// checked on one process by playing t ranks by hand: the padded vocabulary
// (Vp = 64, V = 45) split into 4 column blocks of 16 (the third part
// padding, the last only padding), the per-row partials combined on the host the way the TP
// all-reduces combine them (max, sum, sum). The loss must equal the
// one-block cross_entropy_forward (itself tested against a double
// log-sum-exp), the gradient cross_entropy_backward, block by block; the
// embedding's partial outputs must sum to embedding_forward's, and its
// backward must accumulate exactly the owned rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_device.h"
#include "tests/kernels/grad_check.h"

namespace gpuledger {
namespace {

using testing_util::random_uniform;

constexpr int64_t N = 6, V = 45, Vp = 64, kBlocks = 4, Vl = Vp / kBlocks;
const std::vector<int32_t> kTargets = {0, 44, 17, 3, 33, 25};

TEST(VocabParallelCrossEntropy, BlocksCombineToTheOneRankLossAndGradient) {
  Ledger ledger;
  CpuDevice dev(ledger);
  auto x = random_uniform(N * Vp, -5, 5, 7);
  for (int64_t j = 0; j < V; ++j) x[1 * Vp + j] += 1000.0f;  // exp overflows without the max shift
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = V; j < Vp; ++j) x[i * Vp + j] = 100.0f;  // padding: must be ignored
  std::vector<float> want_loss(N), want_grad(N * Vp);
  const float scale = 0.25f;
  dev.cross_entropy_forward(want_loss.data(), x.data(), kTargets.data(), N, Vp, V);
  dev.cross_entropy_backward(want_grad.data(), x.data(), kTargets.data(), N, Vp, V, scale);

  // each "rank" r holds columns [r·Vl, (r+1)·Vl)
  std::vector<std::vector<float>> blk(kBlocks, std::vector<float>(N * Vl));
  for (int64_t r = 0; r < kBlocks; ++r)
    for (int64_t i = 0; i < N; ++i) std::copy_n(x.begin() + i * Vp + r * Vl, Vl, blk[r].begin() + i * Vl);
  std::vector<float> gmax(N, -std::numeric_limits<float>::infinity()), gtgt(N, 0.0f), gsum(N, 0.0f);
  for (int64_t r = 0; r < kBlocks; ++r) {
    std::vector<float> mx(N), tg(N);
    dev.vocab_ce_stats(mx.data(), tg.data(), blk[r].data(), kTargets.data(), N, Vl, r * Vl, V);
    for (int64_t i = 0; i < N; ++i) {
      gmax[i] = std::max(gmax[i], mx[i]);  // all_reduce max
      gtgt[i] += tg[i];                    // all_reduce sum
    }
    if (r == kBlocks - 1) {  // padding only (columns 48..63 >= V): no maximum
      for (float m : mx) EXPECT_EQ(m, -std::numeric_limits<float>::infinity());
    }
  }
  for (int64_t r = 0; r < kBlocks; ++r) {
    std::vector<float> se(N);
    dev.vocab_ce_exp(blk[r].data(), se.data(), gmax.data(), N, Vl, r * Vl, V);
    for (int64_t i = 0; i < N; ++i) gsum[i] += se[i];
  }
  for (int64_t i = 0; i < N; ++i) {
    const double loss = gmax[i] + std::log(static_cast<double>(gsum[i])) - gtgt[i];
    EXPECT_NEAR(loss, want_loss[i], 1e-5 * std::max(1.0, std::abs(double(want_loss[i])))) << i;
  }
  for (int64_t r = 0; r < kBlocks; ++r) {
    dev.vocab_ce_normalize(blk[r].data(), gsum.data(), N, Vl);
    dev.vocab_ce_backward(blk[r].data(), blk[r].data(), kTargets.data(), N, Vl, r * Vl, scale);
    for (int64_t i = 0; i < N; ++i)
      for (int64_t j = 0; j < Vl; ++j) {
        const int64_t col = r * Vl + j;
        if (col >= V)
          EXPECT_EQ(blk[r][i * Vl + j], 0.0f) << "padding column " << col;
        else
          EXPECT_NEAR(blk[r][i * Vl + j], want_grad[i * Vp + col], 1e-7) << i << "," << col;
      }
  }
}

TEST(VocabParallelEmbedding, PartialsSumToTheLookupAndBackwardKeepsOwnRows) {
  Ledger ledger;
  CpuDevice dev(ledger);
  constexpr int64_t C = 8, rows = 16, B = 2, T = 5;
  const std::vector<int32_t> ids = {0, 15, 16, 31, 47, 5, 16, 16, 63, 2};
  auto wte = random_uniform(rows * kBlocks * C, -1, 1, 3);
  std::vector<float> want(B * T * C);
  dev.embedding_forward(want.data(), ids.data(), wte.data(), nullptr, DType::kFP32, B, T, C, 0);
  std::vector<float> sum(B * T * C, 0.0f), part(B * T * C);
  const auto dout = random_uniform(B * T * C, -1, 1, 4);
  std::vector<float> want_dw(rows * kBlocks * C, 0.0f);
  dev.embedding_backward(want_dw.data(), nullptr, DType::kFP32, dout.data(), DType::kFP32, ids.data(), B, T, C, 0);
  for (int64_t r = 0; r < kBlocks; ++r) {
    const float* w = wte.data() + r * rows * C;
    dev.vocab_embedding_forward(part.data(), ids.data(), w, DType::kFP32, B * T, C, r * rows, rows);
    for (size_t k = 0; k < sum.size(); ++k) sum[k] += part[k];
    std::vector<float> dw(rows * C, 1.0f);  // accumulates onto what is there
    dev.vocab_embedding_backward(dw.data(), DType::kFP32, dout.data(), DType::kFP32, ids.data(), B * T, C, r * rows,
                                 rows);
    for (int64_t k = 0; k < rows * C; ++k)
      EXPECT_NEAR(dw[k], 1.0f + want_dw[r * rows * C + k], 1e-6) << "block " << r << " elem " << k;
  }
  for (size_t k = 0; k < sum.size(); ++k) EXPECT_EQ(sum[k], want[k]) << k;
}

}  // namespace
}  // namespace gpuledger
