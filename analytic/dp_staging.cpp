// Data-parallel gradient reduction sizes (analytic/dp_staging.h).
#include "analytic/dp_staging.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "core/checked_math.h"
#include "core/int_math.h"

namespace gpuledger::analytic {

int64_t dp_bucket_elems(double bucket_mb, int64_t grad_bytes) {
  // Checked before the cast: a NaN or infinite size has no integer value.
  if (!std::isfinite(bucket_mb) || bucket_mb > 1e6)
    throw std::invalid_argument("--bucket-mb " + std::to_string(bucket_mb) + " is not a finite size up to 1e6 MiB");
  const auto elems = static_cast<int64_t>(std::floor(bucket_mb * 1048576.0 / static_cast<double>(grad_bytes)));
  if (!(elems >= 1))
    throw std::invalid_argument("--bucket-mb " + std::to_string(bucket_mb) + " holds no gradient element");
  return elems;
}

int64_t zero1_piece_elems(int64_t bucket_elems, int64_t n) { return std::max<int64_t>(1, bucket_elems / n); }

int64_t dp_reduce_staging_bytes(const std::vector<int64_t>& elems, int64_t zero, int64_t n, int64_t bucket_elems,
                                bool overlap) {
  const int64_t slots = overlap ? 2 : 1;
  if (zero == 0) {
    int64_t p_r = 0;
    for (int64_t p : elems) p_r = checked_add(p_r, p, "parameters of a rank");
    return 4 * std::min(slots * bucket_elems, p_r);
  }
  int64_t largest_shard = 0;
  for (int64_t p : elems) largest_shard = std::max(largest_shard, ceil_div(p, n));
  return checked_product({4, slots, n, std::min(zero1_piece_elems(bucket_elems, n), largest_shard)},
                         "DP staging bytes");
}

int64_t dp_reduce_staging_bytes(const std::vector<ParamUnit>& units, int64_t zero, int64_t n, int64_t bucket_elems,
                                bool overlap) {
  std::vector<int64_t> elems;
  for (const auto& u : units) elems.push_back(u.elems());
  return dp_reduce_staging_bytes(elems, zero, n, bucket_elems, overlap);
}

}  // namespace gpuledger::analytic
