// Fitting a link's α (s per step) and β (busbw, bytes/s) to measured
// collectives, by the model collective_time.h computes with:
//   t_i = α · ring_steps(kind_i, n_i) + (bytes_i · busbw_factor(kind_i, n_i)) / β
// which is linear in (α, 1/β). Least squares over every sample of every kind
// at once, weighted by 1/t_i² — i.e. minimising the relative error, so the
// small sizes (where α shows) weigh as much as the large ones (where β does);
// unweighted, the largest transfer would set both. An α below 0 is clamped to
// 0 and 1/β re-fitted alone.
#pragma once
#include <vector>

#include "perf/network_profile.h"

namespace gpuledger::perf {

struct AlphaBetaFit {
  double alpha_seconds = 0;
  double beta_bytes_per_s = 0;
  double rms_relative_error = 0;  // √(mean((model − t)/t)²) over the samples
  int samples = 0;
};

// Throws std::invalid_argument with fewer than 2 samples, a sample with
// seconds ≤ 0 or a copy kind, or when the data give no positive bandwidth.
AlphaBetaFit fit_alpha_beta(const std::vector<CollectiveSample>& samples);

}  // namespace gpuledger::perf
