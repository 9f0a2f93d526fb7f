// Weighted least squares of the α–β model (see alpha_beta_fit.h).
#include "perf/alpha_beta_fit.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "perf/collective_time.h"

namespace gpuledger::perf {

AlphaBetaFit fit_alpha_beta(const std::vector<CollectiveSample>& samples) {
  if (samples.size() < 2)
    throw std::invalid_argument("fit_alpha_beta: " + std::to_string(samples.size()) + " samples (at least 2)");
  // Σ w·x1², Σ w·x1·x2, Σ w·x2², Σ w·x1·t, Σ w·x2·t with w = 1/t².
  double s11 = 0, s12 = 0, s22 = 0, s1t = 0, s2t = 0;
  std::vector<double> x1, x2;
  for (const auto& s : samples) {
    if (!(s.seconds > 0) || !std::isfinite(s.seconds))
      throw std::invalid_argument("fit_alpha_beta: a sample of " + std::to_string(s.seconds) + " s");
    const double a = static_cast<double>(ring_steps(s.kind, s.group_size));
    const double b = static_cast<double>(s.bytes) * busbw_factor(s.kind, s.group_size);
    const double w = 1.0 / (s.seconds * s.seconds);
    s11 += w * a * a;
    s12 += w * a * b;
    s22 += w * b * b;
    s1t += w * a * s.seconds;
    s2t += w * b * s.seconds;
    x1.push_back(a);
    x2.push_back(b);
  }
  AlphaBetaFit fit;
  fit.samples = static_cast<int>(samples.size());
  const double det = s11 * s22 - s12 * s12;
  double alpha = 0, inv_beta = 0;
  if (det > 1e-12 * s11 * s22) {
    alpha = (s1t * s22 - s2t * s12) / det;
    inv_beta = (s11 * s2t - s12 * s1t) / det;
  }
  if (!(alpha > 0)) {  // clamped (or the system was singular): the bandwidth term alone
    alpha = 0;
    inv_beta = s22 > 0 ? s2t / s22 : 0;
  }
  if (!(inv_beta > 0)) throw std::invalid_argument("fit_alpha_beta: the samples give no positive bandwidth");
  fit.alpha_seconds = alpha;
  fit.beta_bytes_per_s = 1.0 / inv_beta;
  double sq = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    const double model = alpha * x1[i] + x2[i] * inv_beta;
    const double rel = (model - samples[i].seconds) / samples[i].seconds;
    sq += rel * rel;
  }
  fit.rms_relative_error = std::sqrt(sq / static_cast<double>(samples.size()));
  return fit;
}

}  // namespace gpuledger::perf
