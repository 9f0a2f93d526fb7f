// The backend-vs-CPU op suite (see backend_ops_suite.h). Each test uploads the
// same random inputs to the CPU reference and to the backend under test, runs
// the op on both, reads both results back and compares them.
//
// Tolerances (normalized MSE, NMSE = Σ(ref − got)² / Σ ref², ggml's measure),
// by the dtype the result is stored in:
//   fp32: 1e-8. Both compute in fp32; results differ only by summation order
//         and last-ulp differences of expf/tanhf (≤ 2 ulp on CUDA): relative
//         errors ~1e-6 at worst, NMSE ~1e-12. A wrong index or a missing term
//         gives NMSE ~1e-2 or more.
//   bf16: 1e-5. An fp32 difference that crosses a rounding boundary changes the
//         stored value by one ulp, 2⁻⁸ relative: NMSE 1.5e-5 if every element
//         did; in practice a small fraction does.
//   fp16: 1e-6 (an ulp is 2⁻¹¹ relative).
// GEMMs in fp32 run as TF32 on the GPU (10-bit mantissa operands, fp32
// accumulate): products carry ~2⁻¹¹ relative error: NMSE up to ~1e-6, tolerance
// 5e-6. Dropout masks, layout moves and FLOP counts must match exactly.
#include "tests/gpu/backend_ops_suite.h"
#include "kernels/registry/registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kernels/flop_counts.h"

namespace gpuledger::backend_test {

BackendUnderTest& backend() {
  static BackendUnderTest b;
  return b;
}

namespace {

double tol_for(DType t) {
  switch (t) {
    case DType::kFP32: return 1e-8;
    case DType::kBF16: return 1e-5;
    case DType::kFP16: return 1e-6;
  }
  return 0;
}

const DType kAllTypes[] = {DType::kFP32, DType::kBF16, DType::kFP16};
const DType kMainTypes[] = {DType::kFP32, DType::kBF16};

// One tensor held by both devices.
struct Pair {
  Buffer ref, dut;
  DType t = DType::kFP32;
  int64_t n = 0;
};

class BackendOps : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(backend().make) << "no backend under test was set";
    ref_ = make_device("cpu", ref_ledger_);
    dut_ = backend().make(dut_ledger_);
  }

  Device& ref() { return *ref_; }
  Device& dut() { return *dut_; }

  std::vector<float> uniform(int64_t n, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = u(rng_);
    return v;
  }

  // The same values on both devices (rounded to t).
  Pair upload(const std::vector<float>& host, DType t) {
    Pair p = alloc_pair(t, static_cast<int64_t>(host.size()));
    std::vector<unsigned char> bytes(static_cast<size_t>(p.n * dtype_bytes(t)));
    convert_from_fp32(host.data(), bytes.data(), t, p.n);
    ref().copy_from_host(p.ref.data(), bytes.data(), p.n * dtype_bytes(t));
    dut().copy_from_host(p.dut.data(), bytes.data(), p.n * dtype_bytes(t));
    return p;
  }
  Pair random(DType t, int64_t n, float lo = -1.0f, float hi = 1.0f) { return upload(uniform(n, lo, hi), t); }
  // Different values on each device: an element the op under test fails to write stays different.
  Pair output(DType t, int64_t n) {
    Pair p = alloc_pair(t, n);
    std::vector<float> a = uniform(n, 10, 20), b = uniform(n, -20, -10);
    std::vector<unsigned char> bytes(static_cast<size_t>(n * dtype_bytes(t)));
    convert_from_fp32(a.data(), bytes.data(), t, n);
    ref().copy_from_host(p.ref.data(), bytes.data(), n * dtype_bytes(t));
    convert_from_fp32(b.data(), bytes.data(), t, n);
    dut().copy_from_host(p.dut.data(), bytes.data(), n * dtype_bytes(t));
    return p;
  }
  template <class V>
  Pair raw(const std::vector<V>& host) {
    const int64_t bytes = static_cast<int64_t>(host.size() * sizeof(V));
    Pair p;
    p.ref = ref().alloc(bytes, Account::kWorkspace, "test");
    p.dut = dut().alloc(bytes, Account::kWorkspace, "test");
    p.n = static_cast<int64_t>(host.size());
    ref().copy_from_host(p.ref.data(), host.data(), bytes);
    dut().copy_from_host(p.dut.data(), host.data(), bytes);
    return p;
  }
  Pair raw_output(int64_t bytes) {
    std::vector<unsigned char> a(static_cast<size_t>(bytes), 0xAB);
    Pair p = raw(a);
    std::vector<unsigned char> b(static_cast<size_t>(bytes), 0xCD);
    dut().copy_from_host(p.dut.data(), b.data(), bytes);
    return p;
  }

  std::vector<float> read(Device& d, const Buffer& b, DType t, int64_t n) {
    std::vector<unsigned char> bytes(static_cast<size_t>(n * dtype_bytes(t)));
    d.copy_to_host(bytes.data(), b.data(), n * dtype_bytes(t));
    std::vector<float> v(static_cast<size_t>(n));
    convert_to_fp32(bytes.data(), t, v.data(), n);
    return v;
  }

  // NMSE of the backend's result against the reference's, below tol (default: by dtype).
  void expect_close(const Pair& p, const std::string& what, std::optional<double> tol = std::nullopt) {
    const std::vector<float> r = read(ref(), p.ref, p.t, p.n), d = read(dut(), p.dut, p.t, p.n);
    double err = 0, norm = 0;
    int64_t worst = -1;
    double worst_abs = -1;
    for (int64_t i = 0; i < p.n; ++i) {
      if (!std::isfinite(d[i]) && std::isfinite(r[i])) {
        ADD_FAILURE() << what << ": element " << i << " is " << d[i] << ", reference " << r[i];
        return;
      }
      const double e = static_cast<double>(r[i]) - d[i];
      err += e * e;
      norm += static_cast<double>(r[i]) * r[i];
      if (std::abs(e) > worst_abs) worst_abs = std::abs(e), worst = i;
    }
    const double nmse = norm > 0 ? err / norm : err;
    const double limit = tol.value_or(tol_for(p.t));
    EXPECT_LE(nmse, limit) << what << " (" << dtype_name(p.t) << ", " << p.n << " elements): NMSE " << nmse
                           << "; worst element " << worst << ": " << (worst >= 0 ? r[worst] : 0.0f) << " vs "
                           << (worst >= 0 ? d[worst] : 0.0f);
  }

  void expect_same_bytes(const Pair& p, int64_t bytes, const std::string& what) {
    std::vector<unsigned char> r(static_cast<size_t>(bytes)), d(static_cast<size_t>(bytes));
    ref().copy_to_host(r.data(), p.ref.data(), bytes);
    dut().copy_to_host(d.data(), p.dut.data(), bytes);
    int64_t first = -1, count = 0;
    for (int64_t i = 0; i < bytes; ++i)
      if (r[i] != d[i]) {
        if (first < 0) first = i;
        ++count;
      }
    EXPECT_EQ(count, 0) << what << ": " << count << " of " << bytes << " bytes differ, first at " << first;
  }

  void expect_same_flops() { EXPECT_EQ(dut().executed_flops(), ref().executed_flops()); }

  // Both devices run f(device, side) with side 0 = reference, 1 = under test.
  template <class F>
  void both(F&& f) {
    f(ref(), 0);
    f(dut(), 1);
    dut().synchronize();
  }

  std::mt19937 rng_{20240611};

 private:
  Pair alloc_pair(DType t, int64_t n) {
    Pair p;
    p.t = t;
    p.n = n;
    p.ref = ref().alloc(n * dtype_bytes(t), Account::kWorkspace, "test");
    p.dut = dut().alloc(n * dtype_bytes(t), Account::kWorkspace, "test");
    return p;
  }

  Ledger ref_ledger_, dut_ledger_;
  std::unique_ptr<Device> ref_, dut_;
};

// The pointer of a Pair on side 0 (reference) or 1 (under test).
inline void* P(const Pair& p, int side) { return side == 0 ? p.ref.data() : p.dut.data(); }
template <class T>
inline T* P(const Pair& p, int side) {
  return static_cast<T*>(P(p, side));
}

std::string tag(DType t, const std::string& s = {}) { return std::string(dtype_name(t)) + (s.empty() ? "" : " " + s); }

// ---- memory and element-wise ----

TEST_F(BackendOps, AllocBooksTheLedgerAndCopiesRoundTrip) {
  Ledger l;
  auto d = backend().make(l);
  const int64_t before = l.live_total();
  {
    Buffer b = d->alloc(1000, Account::kActivations, "x");
    EXPECT_EQ(l.live(Account::kActivations), 1000);
    EXPECT_EQ(l.live_total(), before + 1000);
    std::vector<int32_t> h(250), back(250, -1);
    for (int i = 0; i < 250; ++i) h[i] = i * 7 - 3;
    d->copy_from_host(b.data(), h.data(), 1000);
    Buffer c = d->alloc(1000, Account::kWorkspace, "y");
    d->copy(c.data(), b.data(), 1000);
    d->copy_to_host(back.data(), c.data(), 1000);
    EXPECT_EQ(back, h);
    d->fill_zero(c.data(), 400);
    d->copy_to_host(back.data(), c.data(), 1000);
    for (int i = 0; i < 100; ++i) ASSERT_EQ(back[i], 0);
    for (int i = 100; i < 250; ++i) ASSERT_EQ(back[i], h[i]);
  }
  EXPECT_EQ(l.live_total(), before);
  EXPECT_EQ(l.live(Account::kActivations), 0);
}

TEST_F(BackendOps, Convert) {
  for (DType src : kAllTypes)
    for (DType dst : kAllTypes) {
      const int64_t n = 1003;
      Pair x = random(src, n, -70000, 70000);  // past fp16's range: inf on both
      Pair y = output(dst, n);
      both([&](Device& d, int s) { d.convert(P(y, s), dst, P(x, s), src, n); });
      expect_same_bytes(y, n * dtype_bytes(dst), tag(src, "-> ") + std::string(dtype_name(dst)));
    }
}

TEST_F(BackendOps, AddAccumulateScale) {
  for (DType t : kAllTypes) {
    const int64_t n = 5000;
    Pair a = random(t, n), b = random(t, n), out = output(t, n);
    both([&](Device& d, int s) { d.add(P(out, s), P(a, s), P(b, s), t, n); });
    expect_close(out, tag(t, "add"));
    both([&](Device& d, int s) { d.scale(P(a, s), t, -0.37f, n); });
    expect_close(a, tag(t, "scale"));
    for (DType st : kAllTypes) {
      Pair dst = random(t, n), src = random(st, n);
      both([&](Device& d, int s) { d.accumulate(P(dst, s), t, P(src, s), st, n); });
      expect_close(dst, tag(t, "accumulate from " + std::string(dtype_name(st))));
    }
  }
}

TEST_F(BackendOps, BiasForwardBackward) {
  const int64_t shapes[][2] = {{1, 7}, {300, 129}, {1000, 64}, {3, 2000}};
  for (DType t : kMainTypes)
    for (auto [rows, cols] : shapes) {
      Pair out = random(t, rows * cols), bias = random(t, cols);
      both([&](Device& d, int s) { d.bias_add(P(out, s), P(bias, s), t, rows, cols); });
      expect_close(out, tag(t, "bias_add"));
      for (DType gt : kMainTypes)
        for (bool acc : {false, true}) {
          Pair dout = random(t, rows * cols);
          Pair db = acc ? random(gt, cols) : output(gt, cols);
          both([&](Device& d, int s) { d.bias_backward(P(db, s), gt, P(dout, s), t, rows, cols, acc); });
          expect_close(db, tag(t, "bias_backward rows " + std::to_string(rows)));
        }
    }
}

// ---- timing ----

// Device::start_timer: CUDA events on a GPU, the host clock on the emulator.
// The time of real work is positive and finite; the op's result is complete.
TEST_F(BackendOps, TimerTimesQueuedWork) {
  const int64_t n = 1 << 16;
  Pair x = random(DType::kFP32, n), y = output(DType::kBF16, n);
  auto timer = dut().start_timer();
  dut().convert(P(y, 1), DType::kBF16, P(x, 1), DType::kFP32, n);
  const double s = timer->stop_seconds();
  EXPECT_GT(s, 0.0);
  EXPECT_LT(s, 10.0);
  ref().convert(P(y, 0), DType::kBF16, P(x, 0), DType::kFP32, n);
  expect_same_bytes(y, n * 2, "convert timed");
}

// ---- embedding ----

TEST_F(BackendOps, Embedding) {
  const int64_t V = 50, P_ = 40, C = 96;
  for (DType t : kMainTypes)
    for (bool pos : {false, true}) {
      const int64_t B = 3, T = 17, off = pos ? 5 : 0;
      std::vector<int32_t> ids(B * T);
      std::uniform_int_distribution<int32_t> u(0, 9);  // few ids: many repeats
      for (auto& i : ids) i = u(rng_) * 5;
      Pair dids = raw(ids);
      Pair wte = random(t, V * C), wpe = random(t, P_ * C), out = output(t, B * T * C);
      both([&](Device& d, int s) {
        d.embedding_forward(P(out, s), P<int32_t>(dids, s), P(wte, s), pos ? P(wpe, s) : nullptr, t, B, T, C, off);
      });
      expect_close(out, tag(t, "embedding_forward"));
      for (DType gt : kMainTypes) {
        Pair dout = random(t, B * T * C), dwte = random(gt, V * C), dwpe = random(gt, P_ * C);
        both([&](Device& d, int s) {
          d.embedding_backward(P(dwte, s), pos ? P(dwpe, s) : nullptr, gt, P(dout, s), t, P<int32_t>(dids, s), B, T, C,
                               off);
        });
        expect_close(dwte, tag(gt, "embedding_backward dwte"));
        if (pos) expect_close(dwpe, tag(gt, "embedding_backward dwpe"));
      }
    }
}

// ---- norms ----

TEST_F(BackendOps, LayerNormAndRmsNorm) {
  const int64_t shapes[][2] = {{7, 33}, {64, 1024}, {3, 4100}, {130, 96}};
  for (DType t : kMainTypes)
    for (auto [N, C] : shapes) {
      const std::string sh = std::to_string(N) + "x" + std::to_string(C);
      Pair x = random(t, N * C, -2, 3), w = random(t, C, 0.5f, 1.5f), b = random(t, C);
      Pair out = output(t, N * C), mean = output(DType::kFP32, N), rstd = output(DType::kFP32, N);
      for (bool with_bias : {true, false}) {
        both([&](Device& d, int s) {
          d.layernorm_forward(P(out, s), P<float>(mean, s), P<float>(rstd, s), P(x, s), P(w, s),
                              with_bias ? P(b, s) : nullptr, t, N, C, 1e-5f);
        });
        expect_close(out, tag(t, "layernorm_forward " + sh));
        expect_close(mean, "layernorm mean " + sh, 1e-10);
        expect_close(rstd, "layernorm rstd " + sh, 1e-10);
      }
      for (DType gt : kMainTypes)
        for (bool acc : {false, true}) {
          Pair dout = random(t, N * C), dx = acc ? random(t, N * C) : output(t, N * C);
          Pair dw = random(gt, C), db = random(gt, C);
          both([&](Device& d, int s) {
            d.layernorm_backward(P(dx, s), P(dw, s), P(db, s), gt, P(dout, s), P(x, s), P(w, s), P<float>(mean, s),
                                 P<float>(rstd, s), t, N, C, acc);
          });
          expect_close(dx, tag(t, "layernorm_backward dx " + sh));
          expect_close(dw, tag(gt, "layernorm_backward dw " + sh));
          expect_close(db, tag(gt, "layernorm_backward dbias " + sh));
        }
      // RMSNorm
      both(
          [&](Device& d, int s) { d.rmsnorm_forward(P(out, s), P<float>(rstd, s), P(x, s), P(w, s), t, N, C, 1e-6f); });
      expect_close(out, tag(t, "rmsnorm_forward " + sh));
      expect_close(rstd, "rmsnorm rstd " + sh, 1e-10);
      for (bool acc : {false, true}) {
        Pair dout = random(t, N * C), dx = acc ? random(t, N * C) : output(t, N * C), dw = random(t, C);
        both([&](Device& d, int s) {
          d.rmsnorm_backward(P(dx, s), P(dw, s), t, P(dout, s), P(x, s), P(w, s), P<float>(rstd, s), t, N, C, acc);
        });
        expect_close(dx, tag(t, "rmsnorm_backward dx " + sh));
        expect_close(dw, tag(t, "rmsnorm_backward dw " + sh));
      }
    }
}

// ---- attention layout, softmax, RoPE ----

AttnShape shape(int64_t B, int64_t Hq, int64_t Hkv, int64_t T, int64_t D,
                std::optional<int64_t> window = std::nullopt) {
  AttnShape s;
  s.B = B, s.Hq = Hq, s.Hkv = Hkv, s.T = T, s.D = D, s.window = window;
  return s;
}

TEST_F(BackendOps, HeadLayoutMoves) {
  for (DType t : kMainTypes) {
    const AttnShape s = shape(2, 6, 2, 19, 12);
    const int64_t nq = s.B * s.Hq * s.T * s.D, nk = s.B * s.Hkv * s.T * s.D, nqkv = nq + 2 * nk;
    const int64_t eb = dtype_bytes(t);
    Pair qkv = random(t, nqkv), q = output(t, nq), k = output(t, nk), v = output(t, nk);
    both([&](Device& d, int i) { d.split_qkv(P(q, i), P(k, i), P(v, i), P(qkv, i), t, s); });
    expect_same_bytes(q, nq * eb, tag(t, "split_qkv q"));
    expect_same_bytes(k, nk * eb, tag(t, "split_qkv k"));
    expect_same_bytes(v, nk * eb, tag(t, "split_qkv v"));
    Pair dqkv = output(t, nqkv);
    both([&](Device& d, int i) { d.merge_qkv_grad(P(dqkv, i), P(q, i), P(k, i), P(v, i), t, s); });
    expect_same_bytes(dqkv, nqkv * eb, tag(t, "merge_qkv_grad"));
    Pair rows = output(t, nq), heads = output(t, nq);
    both([&](Device& d, int i) { d.merge_heads(P(rows, i), P(q, i), t, s); });
    expect_same_bytes(rows, nq * eb, tag(t, "merge_heads"));
    both([&](Device& d, int i) { d.split_heads(P(heads, i), P(rows, i), t, s); });
    expect_same_bytes(heads, nq * eb, tag(t, "split_heads"));
  }
}

TEST_F(BackendOps, Softmax) {
  const AttnShape shapes[] = {shape(1, 1, 1, 1, 8), shape(2, 3, 1, 37, 8), shape(1, 2, 2, 130, 8, 5),
                              shape(1, 1, 1, 300, 8), shape(1, 2, 1, 70, 8, 1)};
  for (DType t : kMainTypes)
    for (const AttnShape& s : shapes) {
      const int64_t n = s.B * s.Hq * s.T * s.T;
      const std::string sh = "T " + std::to_string(s.T) + (s.window ? " window" : "");
      Pair scores = random(DType::kFP32, n, -4, 4), probs = output(t, n);
      both([&](Device& d, int i) { d.softmax_forward(P(probs, i), P<float>(scores, i), t, s); });
      expect_close(probs, tag(t, "softmax_forward " + sh));
      Pair dprobs = random(DType::kFP32, n), dscores = output(DType::kFP32, n);
      both([&](Device& d, int i) { d.softmax_backward(P<float>(dscores, i), P<float>(dprobs, i), P(probs, i), t, s); });
      expect_close(dscores, "softmax_backward " + sh);
    }
}

// Attention sinks: the softmax with a sink per head (probabilities and lse),
// then on a core output (out, lse) the sinks' forward and backward (the
// gradient accumulated onto a nonzero start, in fp32 and in t).
TEST_F(BackendOps, AttentionSinks) {
  const AttnShape shapes[] = {shape(1, 1, 1, 1, 8), shape(2, 4, 2, 37, 16), shape(1, 2, 2, 130, 8, 5)};
  for (DType t : kMainTypes)
    for (const AttnShape& s : shapes) {
      const int64_t n = s.B * s.Hq * s.T * s.T, rows = s.B * s.Hq * s.T;
      const std::string sh = "T " + std::to_string(s.T) + (s.window ? " window" : "");
      Pair scores = random(DType::kFP32, n, -4, 4), sinks = random(t, s.Hq, -2, 3), probs = output(t, n);
      Pair lse = output(DType::kFP32, rows);
      both([&](Device& d, int i) {
        d.softmax_sinks_forward(P(probs, i), P<float>(lse, i), P<float>(scores, i), P(sinks, i), t, s);
      });
      expect_close(probs, tag(t, "softmax_sinks_forward " + sh));
      expect_close(lse, tag(t, "softmax_sinks_forward lse " + sh));
      Pair out = random(t, rows * s.D), lse_in = random(DType::kFP32, rows, 0, 4);
      both([&](Device& d, int i) { d.attention_sinks_forward(P(out, i), P<float>(lse_in, i), P(sinks, i), t, s); });
      expect_close(out, tag(t, "attention_sinks_forward " + sh));
      expect_close(lse_in, tag(t, "attention_sinks_forward lse " + sh));
      for (DType g : {DType::kFP32, t}) {
        Pair dout = random(t, rows * s.D), dsinks = random(g, s.Hq);
        both([&](Device& d, int i) {
          d.attention_sinks_backward(P(dsinks, i), g, P(dout, i), P(out, i), P<float>(lse_in, i), P(sinks, i), t, s);
        });
        expect_close(dsinks, tag(t, "attention_sinks_backward into " + std::string(dtype_name(g)) + " " + sh));
      }
    }
}

TEST_F(BackendOps, Rope) {
  struct Case {
    int64_t B, H, T, D, off;
    float theta;
  };
  const Case cases[] = {{2, 3, 17, 8, 5, 10000.0f}, {1, 2, 40, 128, 5000, 500000.0f}, {1, 1, 3, 2, 0, 10000.0f}};
  for (DType t : kMainTypes)
    for (const Case& c : cases) {
      const int64_t n = c.B * c.H * c.T * c.D;
      Pair x = random(t, n);
      both([&](Device& d, int i) { d.rope_forward(P(x, i), t, c.B, c.H, c.T, c.D, c.off, c.theta); });
      expect_close(x, tag(t, "rope_forward D " + std::to_string(c.D)));
      both([&](Device& d, int i) { d.rope_backward(P(x, i), t, c.B, c.H, c.T, c.D, c.off, c.theta); });
      expect_close(x, tag(t, "rope_backward D " + std::to_string(c.D)));
    }
}

// ---- dropout ----

TEST_F(BackendOps, DropoutDrawsTheSameMask) {
  const RngKey key{0x1234567890ULL, 0xABCDEF12345ULL};
  for (DType t : kMainTypes)
    for (float p : {0.0f, 0.1f, 0.5f, 1.0f}) {
      const int64_t n = 10007;  // not a multiple of 4: a partial Philox block at the end
      Pair x = random(t, n), out = output(t, n), mask = raw_output(n);
      both([&](Device& d, int i) { d.dropout_forward(P(out, i), P<uint8_t>(mask, i), P(x, i), t, n, p, key); });
      expect_same_bytes(mask, n, tag(t, "dropout mask p " + std::to_string(p)));
      expect_close(out, tag(t, "dropout_forward"));
      for (DType dt : kMainTypes) {
        Pair dout = random(t, n), dx = output(dt, n);
        both([&](Device& d, int i) { d.dropout_backward(P(dx, i), dt, P(dout, i), t, P<uint8_t>(mask, i), n, p); });
        expect_close(dx, tag(dt, "dropout_backward"));
      }
    }
}

// ---- flash attention ----

TEST_F(BackendOps, FlashAttention) {
  struct Case {
    AttnShape s;
    float p;
  };
  const Case cases[] = {
      {shape(1, 2, 1, 70, 16), 0.0f},    {shape(2, 4, 2, 129, 64, 50), 0.0f}, {shape(1, 2, 2, 100, 128), 0.0f},
      {shape(1, 1, 1, 65, 80), 0.0f},    {shape(1, 2, 1, 40, 256), 0.0f},     {shape(1, 4, 2, 90, 32), 0.1f},
      {shape(1, 3, 1, 64, 8, 17), 0.3f}, {shape(1, 1, 1, 1, 4), 0.0f},
  };
  const RngKey key{777, 12345};
  for (DType t : kMainTypes)
    for (const Case& c : cases) {
      const AttnShape& s = c.s;
      const std::string sh = "B" + std::to_string(s.B) + " Hq" + std::to_string(s.Hq) + " Hkv" + std::to_string(s.Hkv) +
                             " T" + std::to_string(s.T) + " D" + std::to_string(s.D) + (s.window ? " window" : "") +
                             " p " + std::to_string(c.p);
      const int64_t nq = s.B * s.Hq * s.T * s.D, nk = s.B * s.Hkv * s.T * s.D, rows = s.B * s.Hq * s.T;
      Pair q = random(t, nq, -2, 2), k = random(t, nk, -2, 2), v = random(t, nk), dout = random(t, nq);
      Pair out = output(t, nq), lse = output(DType::kFP32, rows);
      ref().reset_flops();
      dut().reset_flops();
      both([&](Device& d, int i) {
        d.flash_attention_forward(P(out, i), P<float>(lse, i), P(q, i), P(k, i), P(v, i), t, s, c.p, key);
      });
      expect_close(out, tag(t, "flash out " + sh));
      expect_close(lse, "flash lse " + sh, 1e-10);
      Pair dq = output(t, nq), dk = output(t, nk), dv = output(t, nk);
      // Both backward passes read the reference's saved out and lse, so they
      // differentiate exactly the same forward.
      std::vector<unsigned char> saved_out(static_cast<size_t>(nq * dtype_bytes(t)));
      std::vector<float> saved_lse(static_cast<size_t>(rows));
      ref().copy_to_host(saved_out.data(), out.ref.data(), nq * dtype_bytes(t));
      ref().copy_to_host(saved_lse.data(), lse.ref.data(), rows * 4);
      dut().copy_from_host(out.dut.data(), saved_out.data(), nq * dtype_bytes(t));
      dut().copy_from_host(lse.dut.data(), saved_lse.data(), rows * 4);
      both([&](Device& d, int i) {
        d.flash_attention_backward(P(dq, i), P(dk, i), P(dv, i), P(dout, i), P(q, i), P(k, i), P(v, i), P(out, i),
                                   P<float>(lse, i), t, s, c.p, key);
      });
      expect_close(dq, tag(t, "flash dq " + sh));
      expect_close(dk, tag(t, "flash dk " + sh));
      expect_close(dv, tag(t, "flash dv " + sh));
      expect_same_flops();
    }
}

// Blocks (kernels/attn_block.h), as context parallelism's ring runs them: 70
// queries at two-span positions (10 … 44, 200 … 234 of 300) against their own
// 70 keys (causal on the positions), then merged with a block of 130 keys at
// 0 … 64 and 230 … 294 (accumulate); the backward of each block given the
// merged out and lse, the second adding to dq and to dk, dv given.
TEST_F(BackendOps, FlashBlocks) {
  const RngKey key{777, 12345};
  for (const std::optional<int64_t> window : {std::optional<int64_t>{}, std::optional<int64_t>{50}})
    for (DType t : kMainTypes) {
      AttnShape s = shape(2, 4, 2, 70, 32);
      s.window = window;
      AttnBlock own, visiting;
      own.Tk = 70, own.seq = 300, own.q_pos = TokenSpans(10, 35, 200), own.k_pos = own.q_pos;
      visiting = own;
      visiting.Tk = 130, visiting.k_pos = TokenSpans(0, 65, 230), visiting.accumulate = true;
      const float p = 0.1f;
      const int64_t nq = s.B * s.Hq * s.T * s.D, n1 = s.B * s.Hkv * own.Tk * s.D, n2 = s.B * s.Hkv * visiting.Tk * s.D;
      const int64_t rows = s.B * s.Hq * s.T;
      const std::string sh = std::string(window ? "window " : "") + "block";
      Pair q = random(t, nq, -2, 2), k1 = random(t, n1, -2, 2), v1 = random(t, n1), k2 = random(t, n2, -2, 2),
           v2 = random(t, n2), dout = random(t, nq);
      Pair out = output(t, nq), lse = output(DType::kFP32, rows);
      ref().reset_flops();
      dut().reset_flops();
      both([&](Device& d, int i) {
        d.flash_attention_forward(P(out, i), P<float>(lse, i), P(q, i), P(k1, i), P(v1, i), t, s, p, key, own);
      });
      expect_close(out, tag(t, "flash out, own " + sh));
      expect_close(lse, "flash lse, own " + sh, 1e-10);
      // The merge starts from the same state on both: the reference's.
      std::vector<unsigned char> held(static_cast<size_t>(nq * dtype_bytes(t)));
      std::vector<float> held_lse(static_cast<size_t>(rows));
      auto share_reference_result = [&] {
        ref().copy_to_host(held.data(), out.ref.data(), nq * dtype_bytes(t));
        ref().copy_to_host(held_lse.data(), lse.ref.data(), rows * 4);
        dut().copy_from_host(out.dut.data(), held.data(), nq * dtype_bytes(t));
        dut().copy_from_host(lse.dut.data(), held_lse.data(), rows * 4);
      };
      share_reference_result();
      both([&](Device& d, int i) {
        d.flash_attention_forward(P(out, i), P<float>(lse, i), P(q, i), P(k2, i), P(v2, i), t, s, p, key, visiting);
      });
      expect_close(out, tag(t, "flash out, merged " + sh));
      expect_close(lse, "flash lse, merged " + sh, 1e-10);
      share_reference_result();
      Pair dq = output(t, nq), dk1 = output(t, n1), dv1 = output(t, n1), dk2 = random(t, n2), dv2 = random(t, n2);
      both([&](Device& d, int i) {
        d.flash_attention_backward(P(dq, i), P(dk1, i), P(dv1, i), P(dout, i), P(q, i), P(k1, i), P(v1, i), P(out, i),
                                   P<float>(lse, i), t, s, p, key, own);
        d.flash_attention_backward(P(dq, i), P(dk2, i), P(dv2, i), P(dout, i), P(q, i), P(k2, i), P(v2, i), P(out, i),
                                   P<float>(lse, i), t, s, p, key, visiting);
      });
      expect_close(dq, tag(t, "flash dq " + sh));
      expect_close(dk1, tag(t, "flash dk, own " + sh));
      expect_close(dv1, tag(t, "flash dv, own " + sh));
      expect_close(dk2, tag(t, "flash dk, visiting " + sh));
      expect_close(dv2, tag(t, "flash dv, visiting " + sh));
      expect_same_flops();
    }
}

TEST_F(BackendOps, FlashRejectsWhatTheCpuRejects) {
  Pair x = random(DType::kFP32, 64);
  EXPECT_THROW(dut().flash_attention_forward(x.dut.data(), P<float>(x, 1), x.dut.data(), x.dut.data(), x.dut.data(),
                                             DType::kFP32, shape(1, 3, 2, 4, 4), 0.0f, {}),
               std::invalid_argument);
  EXPECT_THROW(dut().flash_attention_forward(x.dut.data(), P<float>(x, 1), x.dut.data(), x.dut.data(), x.dut.data(),
                                             DType::kFP32, shape(1, 1, 1, 4, 4), 1.5f, {}),
               std::invalid_argument);
}

// ---- activations ----

TEST_F(BackendOps, GeluAndSwiglu) {
  for (DType t : kMainTypes) {
    const int64_t n = 7777;
    Pair x = random(t, n, -5, 5), g = random(t, n, -6, 6), u = random(t, n), dout = random(t, n);
    Pair y = output(t, n), dx = output(t, n);
    both([&](Device& d, int i) { d.gelu_forward(P(y, i), P(x, i), t, n); });
    expect_close(y, tag(t, "gelu_forward"));
    both([&](Device& d, int i) { d.gelu_backward(P(dx, i), P(dout, i), P(x, i), t, n); });
    expect_close(dx, tag(t, "gelu_backward"));
    both([&](Device& d, int i) { d.swiglu_forward(P(y, i), P(g, i), P(u, i), t, n); });
    expect_close(y, tag(t, "swiglu_forward"));
    Pair dg = output(t, n), du = output(t, n);
    both([&](Device& d, int i) { d.swiglu_backward(P(dg, i), P(du, i), P(dout, i), P(g, i), P(u, i), t, n); });
    expect_close(dg, tag(t, "swiglu_backward dgate"));
    expect_close(du, tag(t, "swiglu_backward dup"));
    both([&](Device& d, int i) { d.swiglu_clamped_forward(P(y, i), P(g, i), P(u, i), t, n, 1.702f, 0.5f); });
    expect_close(y, tag(t, "swiglu_clamped_forward"));
    both([&](Device& d, int i) {
      d.swiglu_clamped_backward(P(dg, i), P(du, i), P(dout, i), P(g, i), P(u, i), t, n, 1.702f, 0.5f);
    });
    expect_close(dg, tag(t, "swiglu_clamped_backward dgate"));
    expect_close(du, tag(t, "swiglu_clamped_backward dup"));
  }
}

// ---- loss and optimizer ----

TEST_F(BackendOps, CrossEntropy) {
  const int64_t shapes[][3] = {{5, 50, 50}, {33, 1000, 1024}, {2, 5000, 5120}};  // N, V, Vp
  for (auto [N, V, Vp] : shapes) {
    std::vector<int32_t> tg(N);
    std::uniform_int_distribution<int32_t> u(0, static_cast<int32_t>(V - 1));
    for (auto& x : tg) x = u(rng_);
    tg[0] = static_cast<int32_t>(V - 1);
    Pair targets = raw(tg), logits = random(DType::kFP32, N * Vp, -8, 8), losses = output(DType::kFP32, N);
    both([&](Device& d, int i) {
      d.cross_entropy_forward(P<float>(losses, i), P<float>(logits, i), P<int32_t>(targets, i), N, Vp, V);
    });
    expect_close(losses, "cross_entropy_forward V " + std::to_string(V));
    Pair dl = output(DType::kFP32, N * Vp);
    both([&](Device& d, int i) {
      d.cross_entropy_backward(P<float>(dl, i), P<float>(logits, i), P<int32_t>(targets, i), N, Vp, V, 0.25f);
    });
    expect_close(dl, "cross_entropy_backward V " + std::to_string(V));
    both([&](Device& d, int i) {  // in place
      d.cross_entropy_backward(P<float>(logits, i), P<float>(logits, i), P<int32_t>(targets, i), N, Vp, V, 1.0f);
    });
    expect_close(logits, "cross_entropy_backward in place V " + std::to_string(V));
  }
  std::vector<int32_t> bad = {0, 7};
  Pair targets = raw(bad), logits = random(DType::kFP32, 2 * 8), losses = output(DType::kFP32, 2);
  EXPECT_THROW(dut().cross_entropy_forward(P<float>(losses, 1), P<float>(logits, 1), P<int32_t>(targets, 1), 2, 8, 7),
               std::invalid_argument);
}

// ---- vocabulary-parallel embedding and cross-entropy ----

// A rank's slice of the padded vocabulary: rows / columns [begin, begin + n).
// Ids come from [0, 45) with repeats, so a slice holds some of them, none, or
// (past 45) only padding. Copies and sums in the CPU's order: bytes must match.
TEST_F(BackendOps, VocabParallelEmbedding) {
  struct Case {
    int64_t N, C, begin, rows;
  };
  const Case cases[] = {{40, 96, 16, 16}, {7, 300, 0, 20}, {33, 64, 48, 16}, {1, 5, 40, 8}};
  for (const Case& c : cases) {
    std::vector<int32_t> ids(static_cast<size_t>(c.N));
    std::uniform_int_distribution<int32_t> u(0, 44);
    for (auto& i : ids) i = u(rng_) / 3 * 3;  // multiples of 3: repeats
    ids[0] = static_cast<int32_t>(c.begin);   // the slice's first row
    Pair dids = raw(ids);
    const std::string sh = "N " + std::to_string(c.N) + " C " + std::to_string(c.C) + " rows [" +
                           std::to_string(c.begin) + ", " + std::to_string(c.begin + c.rows) + ")";
    for (DType t : kAllTypes) {
      const int64_t eb = dtype_bytes(t);
      Pair wte = random(t, c.rows * c.C), out = output(t, c.N * c.C);
      both([&](Device& d, int s) {
        d.vocab_embedding_forward(P(out, s), P<int32_t>(dids, s), P(wte, s), t, c.N, c.C, c.begin, c.rows);
      });
      expect_same_bytes(out, c.N * c.C * eb, tag(t, "vocab_embedding_forward " + sh));
      for (DType gt : kAllTypes) {
        Pair dout = random(t, c.N * c.C), dwte = random(gt, c.rows * c.C);
        both([&](Device& d, int s) {
          d.vocab_embedding_backward(P(dwte, s), gt, P(dout, s), t, P<int32_t>(dids, s), c.N, c.C, c.begin, c.rows);
        });
        expect_same_bytes(dwte, c.rows * c.C * dtype_bytes(gt),
                          tag(gt, "vocab_embedding_backward from " + std::string(dtype_name(t)) + " " + sh));
      }
    }
  }
}

// The padded vocabulary (V valid of Vp) in tp column blocks; each block's ops
// run on both devices with the same inputs, the global max and sums made on
// the host as the TP all-reduces would.
TEST_F(BackendOps, VocabParallelCrossEntropy) {
  struct Case {
    int64_t N, V, Vp, tp;
  };
  const Case cases[] = {{6, 45, 64, 4}, {33, 1000, 1024, 2}, {3, 5000, 5120, 1}, {2, 9000, 9216, 1}};
  for (const Case& c : cases) {
    const int64_t Vl = c.Vp / c.tp;
    std::vector<int32_t> tg(static_cast<size_t>(c.N));
    std::uniform_int_distribution<int32_t> u(0, static_cast<int32_t>(c.V - 1));
    for (auto& x : tg) x = u(rng_);
    tg[0] = static_cast<int32_t>(c.V - 1);
    if (c.N > 1) tg[1] = 0;
    Pair targets = raw(tg);
    const std::vector<float> x = uniform(c.N * c.Vp, -8, 8);
    std::vector<float> gmax(static_cast<size_t>(c.N), -INFINITY);
    for (int64_t i = 0; i < c.N; ++i)
      for (int64_t j = 0; j < c.V; ++j) gmax[i] = std::max(gmax[i], x[i * c.Vp + j]);
    Pair row_max_in = raw(gmax);
    for (int64_t r = 0; r < c.tp; ++r) {
      const int64_t begin = r * Vl;
      const std::string sh = "N " + std::to_string(c.N) + " V " + std::to_string(c.V) + " Vp " + std::to_string(c.Vp) +
                             " block " + std::to_string(r) + "/" + std::to_string(c.tp);
      std::vector<float> blk(static_cast<size_t>(c.N * Vl));
      for (int64_t i = 0; i < c.N; ++i) std::copy_n(x.begin() + i * c.Vp + begin, Vl, blk.begin() + i * Vl);
      Pair logits = raw(blk), mx = output(DType::kFP32, c.N), tl = output(DType::kFP32, c.N);
      both([&](Device& d, int s) {
        d.vocab_ce_stats(P<float>(mx, s), P<float>(tl, s), P<float>(logits, s), P<int32_t>(targets, s), c.N, Vl, begin,
                         c.V);
      });
      expect_same_bytes(mx, c.N * 4, "vocab_ce_stats row_max " + sh);  // −inf on padding-only blocks
      expect_same_bytes(tl, c.N * 4, "vocab_ce_stats target_logit " + sh);
      Pair se = output(DType::kFP32, c.N);
      both([&](Device& d, int s) {
        d.vocab_ce_exp(P<float>(logits, s), P<float>(se, s), P<float>(row_max_in, s), c.N, Vl, begin, c.V);
      });
      expect_close(logits, "vocab_ce_exp " + sh);
      expect_close(se, "vocab_ce_exp sum " + sh);
      Pair gsum = raw(uniform(c.N, 1.0f, 50.0f));  // stands for the all-reduced sums
      both([&](Device& d, int s) { d.vocab_ce_normalize(P<float>(logits, s), P<float>(gsum, s), c.N, Vl); });
      expect_close(logits, "vocab_ce_normalize " + sh);
      Pair dl = output(DType::kFP32, c.N * Vl);
      both([&](Device& d, int s) {
        d.vocab_ce_backward(P<float>(dl, s), P<float>(logits, s), P<int32_t>(targets, s), c.N, Vl, begin, 0.25f);
      });
      expect_close(dl, "vocab_ce_backward " + sh);
      both([&](Device& d, int s) {  // in place
        d.vocab_ce_backward(P<float>(logits, s), P<float>(logits, s), P<int32_t>(targets, s), c.N, Vl, begin, 1.0f);
      });
      expect_close(logits, "vocab_ce_backward in place " + sh);
    }
  }
}

TEST_F(BackendOps, AdamWAndSumSquares) {
  const int64_t n = 10001;
  for (DType wt : kMainTypes)
    for (DType gt : kMainTypes)
      for (bool with_master : {true, false}) {
        if (!with_master && wt != DType::kFP32) continue;
        Pair master = random(DType::kFP32, n), w = random(wt, n), g = random(gt, n, -3, 3);
        Pair m = random(DType::kFP32, n, -0.1f, 0.1f), v = random(DType::kFP32, n, 0.0f, 0.2f);
        for (int64_t step = 1; step <= 3; ++step)
          both([&](Device& d, int i) {
            d.adamw(with_master ? P<float>(master, i) : nullptr, P(w, i), wt, P(g, i), gt, P<float>(m, i),
                    P<float>(v, i), n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, step, 0.5f);
          });
        const std::string what =
            std::string(with_master ? "master" : "fp32 weights") + ", grads " + std::string(dtype_name(gt));
        if (with_master) expect_close(master, "adamw master " + what);
        expect_close(w, tag(wt, "adamw weights " + what));
        expect_close(m, "adamw m " + what);
        expect_close(v, "adamw v " + what);
      }
  for (DType t : kAllTypes)
    for (int64_t len : {int64_t{1}, int64_t{1000}, int64_t{3000001}}) {
      Pair x = random(t, len, -2, 2);
      const double r = ref().sum_squares(x.ref.data(), t, len), d = dut().sum_squares(x.dut.data(), t, len);
      EXPECT_NEAR(d, r, 1e-12 * r) << tag(t, "sum_squares n " + std::to_string(len));
    }
  EXPECT_THROW(dut().adamw(nullptr, nullptr, DType::kBF16, nullptr, DType::kBF16, nullptr, nullptr, 4, 0.1f, 0.9f, 0.9f,
                           1e-8f, 0.0f, 1, 1.0f),
               std::invalid_argument);
}

// SGD with momentum (and without), Adagrad and Lion: the kernel against the
// CPU reference for three steps, with a master copy and 16-bit weights and
// with fp32 weights (both run kernels/optimizer_rules.h).
TEST_F(BackendOps, SgdAdagradLion) {
  const int64_t n = 10001;
  for (OptimizerKind kind : {OptimizerKind::kSGD, OptimizerKind::kAdagrad, OptimizerKind::kLion})
    for (float momentum : {0.9f, 0.0f}) {
      if (kind != OptimizerKind::kSGD && momentum == 0.0f) continue;
      OptimizerHyper h;
      h.kind = kind;
      h.lr = 1e-2f;
      h.weight_decay = 0.1f;
      h.momentum = momentum;
      h.beta1 = 0.9f;
      h.beta2 = 0.99f;
      h.eps = 1e-10f;
      for (DType wt : kMainTypes) {
        const bool with_master = wt != DType::kFP32;
        Pair master = random(DType::kFP32, n), w = random(wt, n), g = random(wt, n, -3, 3);
        Pair s1 = random(DType::kFP32, n, 0.0f, 0.2f);
        for (int64_t step = 1; step <= 3; ++step)
          both([&](Device& d, int i) {
            d.optimizer_update(with_master ? P<float>(master, i) : nullptr, P(w, i), wt, P(g, i), wt,
                               momentum != 0.0f ? P<float>(s1, i) : nullptr, nullptr, n, h, step, 0.5f);
          });
        const std::string what = std::string(optimizer_name(kind)) + " momentum " + std::to_string(momentum);
        if (with_master) expect_close(master, what + " master");
        expect_close(w, tag(wt, what + " weights"));
        if (momentum != 0.0f) expect_close(s1, what + " state");
      }
    }
}

// ---- KV cache ----

// A two-layer cache of S-token blocks (layer 1 under test), sequences with
// shuffled block tables: a prefill, then decode steps; every format and scale
// granularity, with and without a rolling window. The cache bytes written must
// match the CPU's exactly (same codes, same scales at the same offsets);
// cached_attention's output by NMSE.
TEST_F(BackendOps, KvCacheWriteAndCachedAttention) {
  const int64_t Hkv = 2, Hq = 4, D = 40, S = 4, L = 2, nblocks = 12;
  struct Fmt {
    KvFormat f;
    KvScales s;
  };
  const Fmt fmts[] = {{KvFormat::kBF16, KvScales::kPerTokenHead},
                      {KvFormat::kFP8E4M3, KvScales::kPerTokenHead},
                      {KvFormat::kFP8E4M3, KvScales::kPerTensor},
                      {KvFormat::kInt8, KvScales::kPerTokenHead},
                      {KvFormat::kInt8, KvScales::kPerChannel}};
  for (DType t : kMainTypes)
    for (const Fmt& fm : fmts)
      for (bool windowed : {false, true}) {
        const std::string what = std::string(dtype_name(t)) + " " + std::string(kv_format_name(fm.f)) + " " +
                                 std::string(kv_scales_name(fm.s)) + (windowed ? " window" : "");
        const int64_t ltb = kv_layer_token_bytes(fm.f, fm.s, Hkv, D);
        const int64_t block_bytes = L * S * ltb, F = kv_fixed_scales_per_layer(fm.f, fm.s, Hkv, D);
        Pair pool = raw(std::vector<unsigned char>(static_cast<size_t>(nblocks * block_bytes), 0));
        Pair fixed = raw(std::vector<float>(static_cast<size_t>(std::max<int64_t>(2 * F, 1)), 0.0f));
        // (blocks, len after the prefill); the window (6 slots) keeps a prefill inside it.
        const std::vector<std::vector<int32_t>> tables = {{5, 2, 9}, {0, 7, 3}, {11, 4, 1}};
        std::vector<int64_t> len = windowed ? std::vector<int64_t>{5, 6, 3} : std::vector<int64_t>{7, 9, 1};
        std::vector<int64_t> n_new = len;
        auto view = [&](int side) {
          KvCacheView c;
          c.format = fm.f, c.scales = fm.s, c.Hkv = Hkv, c.D = D, c.block_tokens = S;
          c.block_bytes = block_bytes, c.layer_offset_bytes = S * ltb;  // layer 1
          if (windowed) c.window = 6;
          c.fixed_scales = F > 0 ? P<float>(fixed, side) : nullptr;
          for (size_t b = 0; b < tables.size(); ++b) {
            KvSeqView sv;
            sv.base = P(pool, side), sv.blocks = tables[b], sv.len = len[b], sv.n_new = n_new[b];
            c.seqs.push_back(sv);
          }
          return c;
        };
        for (int step = 0; step < 4; ++step) {
          int64_t tokens = 0;
          for (int64_t n : n_new) tokens += n;
          Pair k = random(t, Hkv * tokens * D, -3, 3), v = random(t, Hkv * tokens * D, -3, 3);
          both([&](Device& d, int i) { d.kv_cache_write(view(i), P(k, i), P(v, i), t, step == 0); });
          expect_same_bytes(pool, nblocks * block_bytes, what + " cache bytes, step " + std::to_string(step));
          if (F > 0) expect_same_bytes(fixed, 2 * F * 4, what + " fixed scales");
          Pair q = random(t, Hq * tokens * D, -2, 2), out = output(t, Hq * tokens * D);
          ref().reset_flops();
          dut().reset_flops();
          both([&](Device& d, int i) { d.cached_attention(P(out, i), P(q, i), t, Hq, view(i)); });
          expect_close(out, what + " cached_attention, step " + std::to_string(step));
          expect_same_flops();
          for (size_t b = 0; b < len.size(); ++b) ++len[b], n_new[b] = 1;  // decode steps
        }
      }
}

// ---- GEMM ----

TEST_F(BackendOps, Gemm) {
  if (!backend().own_gemm) GTEST_SKIP() << backend().name << " runs the CPU's GEMM: nothing to compare";
  struct Case {
    bool ta, tb;
    int64_t m, n, k, batch;
    float alpha, beta;
  };
  const Case cases[] = {
      {false, false, 64, 48, 32, 1, 1.0f, 0.0f},  {false, true, 130, 70, 257, 1, 1.0f, 0.0f},
      {true, false, 33, 65, 17, 3, 0.5f, 1.0f},   {true, true, 128, 256, 64, 2, 1.0f, -0.5f},
      {false, true, 1, 1000, 512, 1, 2.0f, 0.0f}, {false, false, 20, 30, 0, 2, 1.0f, 0.5f},
      {false, false, 20, 30, 40, 2, 0.0f, 0.0f},
  };
  for (DType ab : kAllTypes)
    for (bool c_fp32 : {true, false})
      for (const Case& c : cases) {
        const DType ct = c_fp32 ? DType::kFP32 : ab;
        GemmArgs g;
        g.trans_a = c.ta, g.trans_b = c.tb, g.m = c.m, g.n = c.n, g.k = c.k, g.batch = c.batch;
        g.alpha = c.alpha, g.beta = c.beta, g.ab_type = ab, g.c_type = ct;
        g.lda = (c.ta ? c.m : c.k) + 3;  // padded leading dimensions
        g.ldb = (c.tb ? c.k : c.n) + 1;
        g.ldc = c.n + 2;
        const int64_t a_rows = c.ta ? c.k : c.m, b_rows = c.tb ? c.n : c.k;
        g.stride_a = a_rows * g.lda, g.stride_b = c.batch > 2 ? 0 : b_rows * g.ldb;  // 0: broadcast B
        g.stride_c = c.m * g.ldc;
        Pair a = random(ab, std::max<int64_t>(1, g.stride_a * c.batch)),
             b = random(ab, std::max<int64_t>(1, b_rows * g.ldb * c.batch)), cc = random(ct, c.m * g.ldc * c.batch);
        ref().reset_flops();
        dut().reset_flops();
        both([&](Device& d, int i) {
          GemmArgs x = g;
          x.a = P(a, i), x.b = P(b, i), x.c = P(cc, i);
          d.gemm(x);
        });
        const std::string what = "gemm " + std::string(dtype_name(ab)) + "->" + std::string(dtype_name(ct)) + " m" +
                                 std::to_string(c.m) + " n" + std::to_string(c.n) + " k" + std::to_string(c.k) +
                                 (c.ta ? " Ta" : "") + (c.tb ? " Tb" : "");
        expect_close(cc, what, ab == DType::kFP32 && ct == DType::kFP32 ? 5e-6 : tol_for(ct));
        expect_same_flops();
      }
}

}  // namespace

void set_backend_under_test(BackendUnderTest b) { backend() = std::move(b); }

}  // namespace gpuledger::backend_test
