// The median of timed repetitions (the middle one, or the mean of the middle
// two); 0 for none.
#pragma once
#include <algorithm>
#include <vector>

namespace gpuledger::bench {

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace gpuledger::bench
