// Median, spread, exact Mann-Whitney U (see gate_stats.h).
#include "bench/report/gate_stats.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace gpuledger::report {

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double relative_spread(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  const double m = median_of(v);
  return m != 0 ? (*hi - *lo) / std::fabs(m) : 0;
}

double mann_whitney_p_lower(const std::vector<double>& lower, const std::vector<double>& higher) {
  const size_t m = lower.size(), n = higher.size();
  if (m == 0 || n == 0) return 1.0;
  if (m > 30 || n > 30) throw std::invalid_argument("mann_whitney_p_lower: at most 30 repetitions per side");
  double u = 0;
  for (double a : lower)
    for (double b : higher) u += a > b ? 1.0 : (a == b ? 0.5 : 0.0);
  const auto u_max = static_cast<int64_t>(std::ceil(u));
  // count[i][j][k]: arrangements of i values of `lower` and j of `higher` with U = k;
  // the largest value is either a `lower` one (beating all j) or a `higher` one.
  std::vector<std::vector<std::vector<double>>> count(
      m + 1, std::vector<std::vector<double>>(n + 1, std::vector<double>(m * n + 1, 0.0)));
  for (size_t i = 0; i <= m; ++i)
    for (size_t j = 0; j <= n; ++j) {
      if (i == 0 || j == 0) {
        count[i][j][0] = 1;
        continue;
      }
      for (size_t k = 0; k <= i * j; ++k) count[i][j][k] = (k >= j ? count[i - 1][j][k - j] : 0.0) + count[i][j - 1][k];
    }
  double below = 0, total = 0;
  for (size_t k = 0; k <= m * n; ++k) {
    total += count[m][n][k];
    if (static_cast<int64_t>(k) <= u_max) below += count[m][n][k];
  }
  return below / total;
}

}  // namespace gpuledger::report
