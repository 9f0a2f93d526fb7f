// Per-request latency of a served trace, on the engine clock
// (infer_engine.h: measured step seconds, or a modelled step time), queueing
// included — each figure starts at the request's arrival, not its admission:
//
//   TTFT  = first_token_s − arrival_s (time to first token)
//   TPOT  = (finish_s − first_token_s) / (gen_len − 1), for gen_len > 1: the
//           mean inter-token latency of the request (vLLM's benchmark_serving
//           "TPOT", which leaves the first token out)
//   E2E   = finish_s − arrival_s
//
// Each summarised by mean and the 50th, 90th and 99th percentiles, linearly
// interpolated between order statistics (numpy.percentile's default, which
// vLLM's benchmark_serving uses): the p-th of n sorted values is
// v[⌊r⌋] + (r − ⌊r⌋)(v[⌊r⌋ + 1] − v[⌊r⌋]), r = p/100 · (n − 1).
// Request throughput = completed requests / the engine clock at the end.
#pragma once
#include <cstdint>
#include <vector>

#include "models/transformer/infer_engine.h"

namespace gpuledger {

struct LatencyPercentiles {
  int64_t count = 0;  // values summarised (0: the figures are 0)
  double mean = 0, p50 = 0, p90 = 0, p99 = 0;
};

struct LatencySummary {
  LatencyPercentiles ttft_s, tpot_s, e2e_s;
  int64_t completed = 0;
  double duration_s = 0;                // the engine clock at the end
  double request_throughput_per_s = 0;  // completed / duration (0 when the duration is 0)
};

// The p-th percentile (0 <= p <= 100) of `values` by linear interpolation; throws on none.
double percentile(std::vector<double> values, double p);
LatencyPercentiles summarize(const std::vector<double>& values);
LatencySummary summarize_latency(const std::vector<InferResult>& results, double duration_s);

}  // namespace gpuledger
