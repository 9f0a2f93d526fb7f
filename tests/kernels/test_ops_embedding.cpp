// Token + position embedding on the CPU backend: forward bit-exact against the
// same fp32 arithmetic written out here; backward against central finite
// differences of L = Σ dout·out (tolerances: tests/kernels/grad_check.h),
// with repeated token ids, a position offset, accumulation into existing
// gradients, and 16-bit gradients rounded once per row.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/dtype.h"
#include "kernels/cpu/cpu_device.h"
#include "tests/kernels/grad_check.h"

namespace gpuledger {
namespace {

using testing_util::random_uniform;

struct Dev {
  Ledger ledger;
  CpuDevice d{ledger};
};

TEST(Embedding, ForwardTokenPlusPosition) {
  Dev dev;
  const int64_t B = 2, T = 5, C = 7, V = 11, P = 16, off = 3;
  const std::vector<int32_t> ids = {4, 0, 10, 4, 7, 1, 1, 9, 2, 4};
  const auto wte = random_uniform(V * C, -1, 1, 1), wpe = random_uniform(P * C, -1, 1, 2);
  std::vector<float> out(B * T * C);
  dev.d.embedding_forward(out.data(), ids.data(), wte.data(), wpe.data(), DType::kFP32, B, T, C, off);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < C; ++c)
        ASSERT_EQ(out[(b * T + t) * C + c], wte[ids[b * T + t] * C + c] + wpe[(off + t) * C + c]);
  // Without positions (llama): the token rows themselves.
  dev.d.embedding_forward(out.data(), ids.data(), wte.data(), nullptr, DType::kFP32, B, T, C, 0);
  for (int64_t r = 0; r < B * T; ++r)
    for (int64_t c = 0; c < C; ++c) ASSERT_EQ(out[r * C + c], wte[ids[r] * C + c]);

  // bf16: the sum of the two stored values, rounded once.
  std::vector<uint16_t> te(V * C), pe(P * C), o16(B * T * C);
  convert_from_fp32(wte.data(), te.data(), DType::kBF16, V * C);
  convert_from_fp32(wpe.data(), pe.data(), DType::kBF16, P * C);
  dev.d.embedding_forward(o16.data(), ids.data(), te.data(), pe.data(), DType::kBF16, B, T, C, off);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < C; ++c)
        ASSERT_EQ(o16[(b * T + t) * C + c],
                  fp32_to_bf16(bf16_to_fp32(te[ids[b * T + t] * C + c]) + bf16_to_fp32(pe[(off + t) * C + c])));
}

TEST(Embedding, BackwardMatchesFiniteDifferences) {
  Dev dev;
  const int64_t B = 3, T = 4, C = 6, V = 9, P = 8, off = 2;
  const std::vector<int32_t> ids = {3, 3, 0, 8, 5, 3, 1, 0, 8, 8, 8, 2};  // repeats; 4, 6, 7 unused
  auto wte = random_uniform(V * C, -1, 1, 3), wpe = random_uniform(P * C, -1, 1, 4);
  const auto dout = random_uniform(B * T * C, -1, 1, 5);
  std::vector<float> out(B * T * C);
  auto loss = [&]() {
    dev.d.embedding_forward(out.data(), ids.data(), wte.data(), wpe.data(), DType::kFP32, B, T, C, off);
    return testing_util::dot(dout, out);
  };
  std::vector<float> dwte(V * C, 0.0f), dwpe(P * C, 0.0f);
  dev.d.embedding_backward(dwte.data(), dwpe.data(), DType::kFP32, dout.data(), DType::kFP32, ids.data(), B, T, C, off);
  // Linear in both tables: only rounding separates the two (a few outputs per
  // perturbed element, ≈ 6e-8·4/1e-2 ≈ 2e-5).
  EXPECT_LT(testing_util::max_rel_error(dwte, testing_util::numeric_grad(wte, loss)), 1e-3);
  EXPECT_LT(testing_util::max_rel_error(dwpe, testing_util::numeric_grad(wpe, loss)), 1e-3);
  for (int64_t v : {4, 6, 7})
    for (int64_t c = 0; c < C; ++c) EXPECT_EQ(dwte[v * C + c], 0.0f);  // unused ids: untouched
  for (int64_t p : {0, 1, 6, 7})
    for (int64_t c = 0; c < C; ++c) EXPECT_EQ(dwpe[p * C + c], 0.0f);  // positions outside off..off+T
}

TEST(Embedding, BackwardAccumulatesAndRoundsOncePerRow) {
  Dev dev;
  const int64_t B = 4, T = 64, C = 256, V = 50, P = 70, off = 5;  // 65 536 elements: parallel path
  std::vector<int32_t> ids(B * T);
  for (int64_t i = 0; i < B * T; ++i) ids[i] = static_cast<int32_t>((i * 7 + i / 3) % V);
  const auto dout = random_uniform(B * T * C, -1, 1, 6);
  const auto pre_te = random_uniform(V * C, -1, 1, 7), pre_pe = random_uniform(P * C, -1, 1, 8);

  // Reference, as documented: per id, the token rows summed in fp32 in token
  // order, then added to the existing gradient once; positions likewise over b.
  std::vector<float> sum_te(V * C, 0.0f), sum_pe(P * C, 0.0f);
  std::vector<bool> used(V, false);
  for (int64_t r = 0; r < B * T; ++r) {
    used[ids[r]] = true;
    for (int64_t c = 0; c < C; ++c) sum_te[ids[r] * C + c] += dout[r * C + c];
  }
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < C; ++c) sum_pe[(off + t) * C + c] += dout[(b * T + t) * C + c];

  std::vector<float> dwte = pre_te, dwpe = pre_pe;
  dev.d.embedding_backward(dwte.data(), dwpe.data(), DType::kFP32, dout.data(), DType::kFP32, ids.data(), B, T, C, off);
  for (int64_t v = 0; v < V; ++v)
    for (int64_t c = 0; c < C; ++c)
      ASSERT_EQ(dwte[v * C + c], used[v] ? pre_te[v * C + c] + sum_te[v * C + c] : pre_te[v * C + c]);
  for (int64_t p = 0; p < P; ++p)
    for (int64_t c = 0; c < C; ++c) {
      const bool in = p >= off && p < off + T;
      ASSERT_EQ(dwpe[p * C + c], in ? pre_pe[p * C + c] + sum_pe[p * C + c] : pre_pe[p * C + c]);
    }

  // bf16 gradients: each row rounded once (not once per token), so the result
  // equals the fp32 reference rounded.
  std::vector<uint16_t> g16(V * C);
  convert_from_fp32(pre_te.data(), g16.data(), DType::kBF16, V * C);
  std::vector<float> pre16(V * C);
  convert_to_fp32(g16.data(), DType::kBF16, pre16.data(), V * C);
  dev.d.embedding_backward(g16.data(), nullptr, DType::kBF16, dout.data(), DType::kFP32, ids.data(), B, T, C, off);
  for (int64_t v = 0; v < V; ++v)
    for (int64_t c = 0; c < C; ++c)
      ASSERT_EQ(g16[v * C + c], fp32_to_bf16(used[v] ? pre16[v * C + c] + sum_te[v * C + c] : pre16[v * C + c]));
}

}  // namespace
}  // namespace gpuledger
