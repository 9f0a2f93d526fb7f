// The statistics of the regression gate's timing rule (docs/regress.md): the
// median and relative spread of repetitions, and the exact one-sided
// Mann-Whitney U test that a new set of repetitions is lower than a baseline's.
// Google Benchmark's tools/gbench/report.py (calc_utest, commit 267a111)
// compares repetitions the same way, two-sided through scipy, and warns below
// 9 repetitions; with the handful of repetitions a nightly run affords, the
// exact distribution is used here instead of a normal approximation.
#pragma once
#include <cstdint>
#include <vector>

namespace gpuledger::report {

double median_of(std::vector<double> v);  // 0 for none
// (max − min) / median: the spread of repetitions relative to their median; 0 for fewer than 2.
double relative_spread(const std::vector<double>& v);

// P(U ≤ u) under the null hypothesis that `lower` and `higher` come from one
// distribution, where U counts the pairs with lower[i] > higher[j] (ties half):
// small when `lower` is shifted below `higher`. Exact (counts of the
// arrangements of ranks), for samples of up to 30 each; ties rounded up, so
// the p-value errs towards "not significant".
double mann_whitney_p_lower(const std::vector<double>& lower, const std::vector<double>& higher);

// The fewest repetitions per side for which a one-sided exact U test can
// reach p < 0.05 (1 / C(8, 4) = 0.014; with 3 per side the smallest p is 1/20).
inline constexpr int64_t kUTestMinRepetitions = 4;

}  // namespace gpuledger::report
