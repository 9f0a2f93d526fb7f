// LayerNorm and RMSNorm on the CPU backend: forward against a double-precision
// reference, backward (dx, dw, dbias) against central finite differences of
// L = Σ dout·out (tolerances: tests/kernels/grad_check.h), the accumulate
// flags, and 16-bit storage.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/dtype.h"
#include "kernels/cpu/cpu_device.h"
#include "tests/kernels/grad_check.h"

namespace gpuledger {
namespace {

using testing_util::max_rel_error;
using testing_util::numeric_grad;
using testing_util::random_uniform;

constexpr float kEps = 1e-5f;
// Finite-difference tolerance: 5× the worst-case estimate in grad_check.h for
// rows of 32 (2e-4); the measured errors are about 2e-5.
constexpr double kFdTol = 1e-3;

struct Dev {
  Ledger ledger;
  CpuDevice d{ledger};
};

// ---- LayerNorm ----

TEST(LayerNorm, ForwardMatchesDoubleReference) {
  Dev dev;
  const int64_t N = 5, C = 37;
  auto x = random_uniform(N * C, -2.0f, 3.0f, 1);  // mean ≈ 0.5: the centring matters
  const auto w = random_uniform(C, 0.5f, 1.5f, 2), b = random_uniform(C, -0.5f, 0.5f, 3);
  x[3] = 40.0f;  // an outlier row
  std::vector<float> out(N * C), mean(N), rstd(N);
  dev.d.layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), DType::kFP32, N, C, kEps);
  for (int64_t r = 0; r < N; ++r) {
    double mu = 0, var = 0;
    for (int64_t c = 0; c < C; ++c) mu += x[r * C + c];
    mu /= C;
    for (int64_t c = 0; c < C; ++c) var += (x[r * C + c] - mu) * (x[r * C + c] - mu);
    var /= C;
    const double rs = 1.0 / std::sqrt(var + kEps);
    // mean and rstd are one fp32 rounding from the double values.
    EXPECT_NEAR(mean[r], mu, 1e-6 * (1 + std::abs(mu)));
    EXPECT_NEAR(rstd[r], rs, 1e-6 * rs);
    for (int64_t c = 0; c < C; ++c) {
      const double ref = (x[r * C + c] - mu) * rs * w[c] + b[c];
      // A handful of fp32 roundings of O(1..10) terms: ≲ 5·6e-8·10 = 3e-6.
      EXPECT_NEAR(out[r * C + c], ref, 1e-5 * (1 + std::abs(ref))) << r << "," << c;
    }
  }
  // Statistics are optional (inference): the same output without them.
  std::vector<float> out2(N * C);
  dev.d.layernorm_forward(out2.data(), nullptr, nullptr, x.data(), w.data(), b.data(), DType::kFP32, N, C, kEps);
  EXPECT_EQ(out, out2);
}

TEST(LayerNorm, BackwardMatchesFiniteDifferences) {
  Dev dev;
  const int64_t N = 4, C = 32;
  auto x = random_uniform(N * C, -1.0f, 2.0f, 4);
  auto w = random_uniform(C, 0.5f, 1.5f, 5), b = random_uniform(C, -0.5f, 0.5f, 6);
  const auto dout = random_uniform(N * C, -1.0f, 1.0f, 7);
  std::vector<float> out(N * C), mean(N), rstd(N);
  auto loss = [&]() {
    dev.d.layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), DType::kFP32, N, C,
                            kEps);
    return testing_util::dot(dout, out);
  };
  loss();
  std::vector<float> dx(N * C, 0.0f), dw(C, 0.0f), db(C, 0.0f);
  dev.d.layernorm_backward(dx.data(), dw.data(), db.data(), DType::kFP32, dout.data(), x.data(), w.data(), mean.data(),
                           rstd.data(), DType::kFP32, N, C, false);
  EXPECT_LT(max_rel_error(dx, numeric_grad(x, loss)), kFdTol);
  EXPECT_LT(max_rel_error(dw, numeric_grad(w, loss)), kFdTol);
  EXPECT_LT(max_rel_error(db, numeric_grad(b, loss)), kFdTol);
}

TEST(LayerNorm, BackwardAccumulates) {
  Dev dev;
  const int64_t N = 300, C = 130;  // over the parallel threshold and the column block
  const auto x = random_uniform(N * C, -1.0f, 1.0f, 8), w = random_uniform(C, 0.5f, 1.5f, 9);
  const auto b = random_uniform(C, -0.5f, 0.5f, 10), dout = random_uniform(N * C, -1, 1, 11);
  std::vector<float> out(N * C), mean(N), rstd(N);
  dev.d.layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), DType::kFP32, N, C, kEps);
  std::vector<float> dx0(N * C, 123.0f), dw0(C, 0.0f), db0(C, 0.0f);  // dx0 garbage: overwritten
  dev.d.layernorm_backward(dx0.data(), dw0.data(), db0.data(), DType::kFP32, dout.data(), x.data(), w.data(),
                           mean.data(), rstd.data(), DType::kFP32, N, C, false);
  const auto pre_dx = random_uniform(N * C, -1, 1, 12), pre_dw = random_uniform(C, -1, 1, 13);
  const auto pre_db = random_uniform(C, -1, 1, 14);
  std::vector<float> dx = pre_dx, dw = pre_dw, db = pre_db;
  dev.d.layernorm_backward(dx.data(), dw.data(), db.data(), DType::kFP32, dout.data(), x.data(), w.data(), mean.data(),
                           rstd.data(), DType::kFP32, N, C, true);
  for (int64_t i = 0; i < N * C; ++i) EXPECT_EQ(dx[i], pre_dx[i] + dx0[i]) << i;  // one fp32 add
  for (int64_t c = 0; c < C; ++c) {
    EXPECT_NEAR(dw[c], pre_dw[c] + dw0[c], 1e-6 * (1 + std::abs(dw0[c])));
    EXPECT_NEAR(db[c], pre_db[c] + db0[c], 1e-6 * (1 + std::abs(db0[c])));
  }
  // Without accumulate_dx, dw and dbias still accumulate (they sum over microbatches).
  std::vector<float> dx2(N * C);
  std::vector<float> dw2 = dw0, db2 = db0;
  dev.d.layernorm_backward(dx2.data(), dw2.data(), db2.data(), DType::kFP32, dout.data(), x.data(), w.data(),
                           mean.data(), rstd.data(), DType::kFP32, N, C, false);
  EXPECT_EQ(dx2, dx0);
  for (int64_t c = 0; c < C; ++c) EXPECT_NEAR(dw2[c], 2 * dw0[c], 1e-6 * (1 + std::abs(dw0[c])));
}

TEST(LayerNorm, SixteenBitStorage) {
  Dev dev;
  const int64_t N = 6, C = 48;
  for (DType t : {DType::kBF16, DType::kFP16}) {
    SCOPED_TRACE(dtype_name(t));
    const double ut = t == DType::kBF16 ? 1.0 / 256 : 1.0 / 2048;  // unit roundoff of t
    auto xf = random_uniform(N * C, -1, 2, 15), wf = random_uniform(C, 0.5f, 1.5f, 16);
    auto bf = random_uniform(C, -0.5f, 0.5f, 17), df = random_uniform(N * C, -1, 1, 18);
    std::vector<uint16_t> x(N * C), w(C), b(C), dout(N * C), out(N * C), dx(N * C);
    convert_from_fp32(xf.data(), x.data(), t, N * C);
    convert_from_fp32(wf.data(), w.data(), t, C);
    convert_from_fp32(bf.data(), b.data(), t, C);
    convert_from_fp32(df.data(), dout.data(), t, N * C);
    // The fp32 run on the same (rounded) values is the reference.
    convert_to_fp32(x.data(), t, xf.data(), N * C);
    convert_to_fp32(w.data(), t, wf.data(), C);
    convert_to_fp32(b.data(), t, bf.data(), C);
    convert_to_fp32(dout.data(), t, df.data(), N * C);
    std::vector<float> out32(N * C), mean(N), rstd(N), mean32(N), rstd32(N);
    dev.d.layernorm_forward(out32.data(), mean32.data(), rstd32.data(), xf.data(), wf.data(), bf.data(), DType::kFP32,
                            N, C, kEps);
    dev.d.layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), t, N, C, kEps);
    EXPECT_EQ(mean, mean32);
    EXPECT_EQ(rstd, rstd32);
    std::vector<float> outf(N * C);
    convert_to_fp32(out.data(), t, outf.data(), N * C);
    for (int64_t i = 0; i < N * C; ++i) EXPECT_NEAR(outf[i], out32[i], ut * std::abs(out32[i]));

    // Backward: 16-bit dx, fp32 and 16-bit weight gradients.
    std::vector<float> dx32(N * C), dw32(C, 0.0f), db32(C, 0.0f);
    dev.d.layernorm_backward(dx32.data(), dw32.data(), db32.data(), DType::kFP32, df.data(), xf.data(), wf.data(),
                             mean32.data(), rstd32.data(), DType::kFP32, N, C, false);
    std::vector<uint16_t> dw(C, 0), db(C, 0);  // 16-bit zeros
    dev.d.layernorm_backward(dx.data(), dw.data(), db.data(), t, dout.data(), x.data(), w.data(), mean.data(),
                             rstd.data(), t, N, C, false);
    std::vector<float> dxf(N * C), dwf(C), dbf(C);
    convert_to_fp32(dx.data(), t, dxf.data(), N * C);
    convert_to_fp32(dw.data(), t, dwf.data(), C);
    convert_to_fp32(db.data(), t, dbf.data(), C);
    for (int64_t i = 0; i < N * C; ++i) EXPECT_NEAR(dxf[i], dx32[i], ut * std::abs(dx32[i]));
    for (int64_t c = 0; c < C; ++c) {
      EXPECT_NEAR(dwf[c], dw32[c], ut * std::abs(dw32[c]));
      EXPECT_NEAR(dbf[c], db32[c], ut * std::abs(db32[c]));
    }
  }
}

// ---- RMSNorm ----

TEST(RmsNorm, ForwardMatchesDoubleReference) {
  Dev dev;
  const int64_t N = 5, C = 37;
  const auto x = random_uniform(N * C, -2.0f, 3.0f, 21), w = random_uniform(C, 0.5f, 1.5f, 22);
  std::vector<float> out(N * C), rstd(N);
  dev.d.rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), DType::kFP32, N, C, kEps);
  for (int64_t r = 0; r < N; ++r) {
    double ms = 0;
    for (int64_t c = 0; c < C; ++c) ms += static_cast<double>(x[r * C + c]) * x[r * C + c];
    const double rs = 1.0 / std::sqrt(ms / C + kEps);
    EXPECT_NEAR(rstd[r], rs, 1e-6 * rs);
    for (int64_t c = 0; c < C; ++c) {
      const double ref = x[r * C + c] * rs * w[c];
      EXPECT_NEAR(out[r * C + c], ref, 1e-5 * (1 + std::abs(ref)));
    }
  }
}

TEST(RmsNorm, BackwardMatchesFiniteDifferences) {
  Dev dev;
  const int64_t N = 4, C = 32;
  auto x = random_uniform(N * C, -1.0f, 2.0f, 23), w = random_uniform(C, 0.5f, 1.5f, 24);
  const auto dout = random_uniform(N * C, -1.0f, 1.0f, 25);
  std::vector<float> out(N * C), rstd(N);
  auto loss = [&]() {
    dev.d.rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), DType::kFP32, N, C, kEps);
    return testing_util::dot(dout, out);
  };
  loss();
  std::vector<float> dx(N * C), dw(C, 0.0f);
  dev.d.rmsnorm_backward(dx.data(), dw.data(), DType::kFP32, dout.data(), x.data(), w.data(), rstd.data(), DType::kFP32,
                         N, C, false);
  EXPECT_LT(max_rel_error(dx, numeric_grad(x, loss)), kFdTol);
  EXPECT_LT(max_rel_error(dw, numeric_grad(w, loss)), kFdTol);

  // accumulate_dx adds to what is there.
  const auto pre = random_uniform(N * C, -1, 1, 26);
  std::vector<float> dx_acc = pre, dw_acc(C, 0.0f);
  dev.d.rmsnorm_backward(dx_acc.data(), dw_acc.data(), DType::kFP32, dout.data(), x.data(), w.data(), rstd.data(),
                         DType::kFP32, N, C, true);
  for (int64_t i = 0; i < N * C; ++i) EXPECT_EQ(dx_acc[i], pre[i] + dx[i]);
  EXPECT_EQ(dw_acc, dw);
}

}  // namespace
}  // namespace gpuledger
