// The row operations of cached attention (kernels/cpu/kv_row_ops.h) on every
// path this CPU runs (portable always; AVX2+FMA+F16C where present):
//  - the vectorized exp against exp in double over [−87, 88] (816,802 points):
//    max relative error ≤ 4·2^−24 (measured here: 1.17e−7, 1.96·2^−24; the
//    fp32 roundings of the range reduction and the Horner steps on top of the
//    polynomial's own error); and exp_shifted_sum's values and sum, tails included;
//  - dot and axpy on bf16, FP8 E4M3, int8 and int4 rows read in place, D not a
//    multiple of 8, against the format's scalar decode (kernels/kv_storage.h,
//    core/dtype.h) in double: |err| ≤ γ_{D+2}·Σ|q·v| for the dot (any order of
//    an fp32 sum of D products, Higham §3.1; int4 adds the group scale and
//    zero steps, so γ_{D+4}·Σ|q|(|code·scale| + |zero|)), and 2u·(|acc| + |w·v|)
//    per element for the axpy (one product, one sum; int4 three roundings).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "kernels/cpu/kv_row_ops.h"

namespace gpuledger {
namespace {

constexpr double kU = 1.0 / (1 << 24);

std::vector<CpuIsa> paths_here() {
  std::vector<CpuIsa> p{CpuIsa::kPortable};
  if (cpu_best_isa() != CpuIsa::kPortable) p.push_back(cpu_best_isa());
  return p;
}

TEST(KvRowOps, ExpMaxRelativeError) {
  std::vector<float> x;
  for (double v = -87.0; v <= 88.0; v += 1.0 / 4096) x.push_back(static_cast<float>(v));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int i = 0; i < 100000; ++i) x.push_back(u(rng));  // dense near 0, where softmax weights live
  x.push_back(0.0f);
  std::vector<float> y(x.size());
  for (CpuIsa isa : paths_here()) {
    kv_row_ops(isa).exp(x.data(), y.data(), static_cast<int64_t>(x.size()));
    double worst = 0;
    float at = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double ref = std::exp(static_cast<double>(x[i]));
      const double rel = std::abs(y[i] - ref) / ref;
      if (!(rel <= worst)) {
        worst = rel;
        at = x[i];
      }
    }
    std::printf("exp (%s): max relative error %.3e (%.2f · 2^-24) at x = %.6g over %zu points\n", cpu_isa_name(isa),
                worst, worst / kU, at, x.size());
    EXPECT_LE(worst, 4 * kU) << cpu_isa_name(isa) << " at x = " << at;
    EXPECT_EQ(y.back(), 1.0f);  // e^0
  }
}

TEST(KvRowOps, ExpShiftedSumWritesEveryValueAndSumsThem) {
  for (CpuIsa isa : paths_here())
    for (int64_t n : {1, 7, 8, 13, 64}) {
      std::vector<float> x(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = 0.37f * static_cast<float>(i) - 3.0f;
      const float m = 0.37f * static_cast<float>(n - 1) - 3.0f;  // the max
      std::vector<float> y = x;
      const float sum = kv_row_ops(isa).exp_shifted_sum(y.data(), n, m);
      double ref_sum = 0;
      for (int64_t i = 0; i < n; ++i) {
        // x − m is rounded to fp32 before the exp, as the kernel does it.
        const double ref = std::exp(static_cast<double>(x[static_cast<size_t>(i)] - m));
        ref_sum += ref;
        EXPECT_NEAR(y[static_cast<size_t>(i)], ref, 6 * kU * ref) << cpu_isa_name(isa) << " n " << n << " i " << i;
      }
      EXPECT_NEAR(sum, ref_sum, (n + 6) * kU * ref_sum) << cpu_isa_name(isa) << " n " << n;
    }
}

// One row of D values in format f: its bytes, int4 group parameters, and the
// values they decode to (before any token/tensor/channel scale).
struct Row {
  std::vector<uint8_t> bytes, params;
  std::vector<double> value;
};

Row make_row(KvFormat f, int64_t D, int64_t group, std::mt19937& rng) {
  Row r;
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::uniform_int_distribution<int> byte(0, 255);
  r.value.resize(static_cast<size_t>(D));
  if (f == KvFormat::kBF16) {
    r.bytes.resize(static_cast<size_t>(2 * D));
    for (int64_t d = 0; d < D; ++d) {
      const uint16_t b = fp32_to_bf16(u(rng));
      std::memcpy(r.bytes.data() + 2 * d, &b, 2);
      r.value[static_cast<size_t>(d)] = bf16_to_fp32(b);
    }
  } else if (f == KvFormat::kFP8E4M3 || f == KvFormat::kInt8) {
    r.bytes.resize(static_cast<size_t>(D));
    for (int64_t d = 0; d < D; ++d) {
      uint8_t code = static_cast<uint8_t>(byte(rng));
      if (f == KvFormat::kFP8E4M3 && (code & 0x7F) == 0x7F) code ^= 1;  // not NaN
      if (f == KvFormat::kInt8 && code == 0x80) code = 0x81;            // −128 unused
      r.bytes[static_cast<size_t>(d)] = code;
      r.value[static_cast<size_t>(d)] =
          f == KvFormat::kFP8E4M3 ? fp8_e4m3_to_fp32(code) : static_cast<double>(static_cast<int8_t>(code));
    }
  } else {  // int4: codes 0 … 15, a (scale, zero) fp16 pair per group
    r.bytes.assign(static_cast<size_t>(D / 2), 0);
    r.params.resize(static_cast<size_t>(D / group * 4));
    for (int64_t g = 0; g < D / group; ++g) {
      const uint16_t s16 = fp32_to_fp16(0.01f + 0.2f * std::abs(u(rng))), z16 = fp32_to_fp16(u(rng));
      std::memcpy(r.params.data() + 4 * g, &s16, 2);
      std::memcpy(r.params.data() + 4 * g + 2, &z16, 2);
      for (int64_t d = g * group; d < (g + 1) * group; ++d) {
        const int code = byte(rng) & 0xF;
        r.bytes[static_cast<size_t>(d / 2)] |= static_cast<uint8_t>(code << (4 * (d % 2)));
        r.value[static_cast<size_t>(d)] = code * static_cast<double>(fp16_to_fp32(s16)) + fp16_to_fp32(z16);
      }
    }
  }
  return r;
}

TEST(KvRowOps, DotAndAxpyReadEveryFormatInPlace) {
  struct Shape {
    KvFormat f;
    int64_t D, group;
  };
  const Shape shapes[] = {{KvFormat::kBF16, 13, 0},     {KvFormat::kBF16, 128, 0}, {KvFormat::kFP8E4M3, 13, 0},
                          {KvFormat::kFP8E4M3, 128, 0}, {KvFormat::kInt8, 29, 0},  {KvFormat::kInt8, 128, 0},
                          {KvFormat::kInt4, 12, 4},     {KvFormat::kInt4, 128, 32}};
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (CpuIsa isa : paths_here())
    for (const Shape& sh : shapes) {
      SCOPED_TRACE(testing::Message() << cpu_isa_name(isa) << " " << kv_format_name(sh.f) << " D " << sh.D);
      const Row row = make_row(sh.f, sh.D, sh.group, rng);
      std::vector<float> q(static_cast<size_t>(sh.D)), acc0(static_cast<size_t>(sh.D));
      for (auto& v : q) v = u(rng);
      for (auto& v : acc0) v = u(rng);
      const KvRowFormat fmt{sh.f, sh.D, sh.group > 0 ? sh.group : kKvDefaultGroup, fp8_e4m3_table()};
      const KvRowOps& ops = kv_row_ops(isa);
      const uint8_t* params = row.params.empty() ? nullptr : row.params.data();

      double ref = 0, bound = 0;
      for (int64_t d = 0; d < sh.D; ++d) {
        const auto i = static_cast<size_t>(d);
        ref += q[i] * row.value[i];
        bound += std::abs(q[i] * row.value[i]);
      }
      if (sh.f == KvFormat::kInt4) {  // the bound over code·scale and zero separately
        bound = 0;
        for (int64_t d = 0; d < sh.D; ++d) {
          const auto i = static_cast<size_t>(d);
          uint16_t s16, z16;
          std::memcpy(&s16, row.params.data() + 4 * (d / sh.group), 2);
          std::memcpy(&z16, row.params.data() + 4 * (d / sh.group) + 2, 2);
          bound += std::abs(q[i]) * (std::abs(row.value[i] - fp16_to_fp32(z16)) + std::abs(fp16_to_fp32(z16)));
        }
      }
      const int64_t extra = sh.f == KvFormat::kInt4 ? 4 : 2;
      const double gamma = (sh.D + extra) * kU / (1 - (sh.D + extra) * kU);
      EXPECT_NEAR(ops.dot(fmt, q.data(), row.bytes.data(), params), ref, gamma * bound + 1e-30);

      const float w = 0.625f;
      std::vector<float> acc = acc0;
      ops.axpy(fmt, acc.data(), w, row.bytes.data(), params);
      for (int64_t d = 0; d < sh.D; ++d) {
        const auto i = static_cast<size_t>(d);
        const double want = acc0[i] + w * row.value[i];
        const double tol = (sh.f == KvFormat::kInt4 ? 4 : 2) * kU *
                               (std::abs(acc0[i]) + std::abs(w) * (std::abs(row.value[i]) + 4.0)) +
                           1e-30;
        EXPECT_NEAR(acc[i], want, tol) << "d " << d;
      }
    }
}

}  // namespace
}  // namespace gpuledger
