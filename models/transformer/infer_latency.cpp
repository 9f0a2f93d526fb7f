// Latency percentiles of a served trace (see infer_latency.h).
#include "models/transformer/infer_latency.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace gpuledger {

double percentile(std::vector<double> values, double p) {
  if (values.empty()) throw std::invalid_argument("a percentile of no values");
  if (!(p >= 0 && p <= 100)) throw std::invalid_argument("a percentile must lie in [0, 100]");
  std::sort(values.begin(), values.end());
  const double r = p / 100.0 * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(r));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (r - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

LatencyPercentiles summarize(const std::vector<double>& values) {
  LatencyPercentiles out;
  out.count = static_cast<int64_t>(values.size());
  if (values.empty()) return out;
  out.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  out.p50 = percentile(values, 50);
  out.p90 = percentile(values, 90);
  out.p99 = percentile(values, 99);
  return out;
}

LatencySummary summarize_latency(const std::vector<InferResult>& results, double duration_s) {
  std::vector<double> ttft, tpot, e2e;
  LatencySummary out;
  for (const auto& r : results) {
    if (r.finish_step < 0) continue;  // not completed
    ++out.completed;
    ttft.push_back(r.first_token_s - r.arrival_s);
    e2e.push_back(r.finish_s - r.arrival_s);
    if (r.tokens.size() > 1) tpot.push_back((r.finish_s - r.first_token_s) / static_cast<double>(r.tokens.size() - 1));
  }
  out.ttft_s = summarize(ttft);
  out.tpot_s = summarize(tpot);
  out.e2e_s = summarize(e2e);
  out.duration_s = duration_s;
  out.request_throughput_per_s = duration_s > 0 ? static_cast<double>(out.completed) / duration_s : 0.0;
  return out;
}

}  // namespace gpuledger
