// Test helpers for the CPU op tests: random inputs, and central finite
// differences of a scalar loss L(x) = Σ dout·out (dout random, fixed), to be
// compared with an op's analytic backward by max relative error.
//
// Why the tolerances in the tests are what they are. With a step h, the
// central difference (L(x+h) − L(x−h)) / 2h differs from dL/dx by
//   (i) truncation, h²·L'''/6: about 2e-5 for h = 1e-2 and O(1) third
//       derivatives (the ops under test are smooth);
//  (ii) rounding: the op computes in fp32, so each output it changes carries
//       an error of a few u = 2^-24 relative; outputs a perturbation does not
//       touch are bit-identical in both evaluations and cancel exactly. The
//       noise is thus about u·Σ_touched|dout·out| / h, e.g. 6e-8·32/1e-2 ≈ 2e-4
//       for a row of 32 elements.
// A wrong backward (a missing term, a wrong sign) errs by O(1).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

namespace gpuledger::testing_util {

inline std::vector<float> random_uniform(int64_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = u(rng);
  return v;
}

inline double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// dL/dx_i by central differences, for every element of x. `loss` reads x (which
// this function perturbs in place and restores). The step actually taken is
// the difference of the two perturbed fp32 values, not the nominal 2h.
inline std::vector<double> numeric_grad(std::vector<float>& x, const std::function<double()>& loss, float h = 1e-2f) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float x0 = x[i];
    const float xp = x0 + h, xm = x0 - h;
    x[i] = xp;
    const double lp = loss();
    x[i] = xm;
    const double lm = loss();
    x[i] = x0;
    g[i] = (lp - lm) / (static_cast<double>(xp) - xm);
  }
  return g;
}

// max_i |analytic_i − numeric_i| / max_i |numeric_i|: relative to the gradient's
// scale, so components that happen to be near zero do not dominate.
template <class V>
double max_rel_error(const V& analytic, const std::vector<double>& numeric) {
  double num = 0, den = 0;
  for (size_t i = 0; i < numeric.size(); ++i) {
    num = std::max(num, std::abs(static_cast<double>(analytic[i]) - numeric[i]));
    den = std::max(den, std::abs(numeric[i]));
  }
  return den > 0 ? num / den : num;
}

}  // namespace gpuledger::testing_util
