// Bucketed data-parallel gradient all-reduce (see grad_buckets.h).
#include "parallel/dp/grad_buckets.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "models/transformer/params.h"

namespace gpuledger {

int64_t bucket_elems(double bucket_mb, int64_t grad_bytes) {
  const auto n = static_cast<int64_t>(std::floor(bucket_mb * 1048576.0 / static_cast<double>(grad_bytes)));
  if (n < 1) throw std::invalid_argument("--bucket-mb " + std::to_string(bucket_mb) + " holds no gradient element");
  return n;
}

void all_reduce_gradients(Device& dev, Comm& dp, const std::vector<void*>& grads,
                          const std::vector<int64_t>& elems, DType g, int64_t bucket,
                          void* staging) {
  const int64_t gb = dtype_bytes(g);
  int64_t total = 0;
  for (int64_t n : elems) total += n;
  // Walk the concatenation [unit 0 | unit 1 | …] in windows of `bucket` elements.
  size_t u = 0;
  int64_t in_unit = 0;  // position within unit u
  for (int64_t start = 0; start < total; start += bucket) {
    const int64_t len = std::min(bucket, total - start);
    // gather the pieces of this bucket into the staging buffer
    struct Piece { size_t unit; int64_t off, n, at; };
    std::vector<Piece> pieces;
    int64_t filled = 0;
    while (filled < len) {
      while (in_unit >= elems[u]) { ++u; in_unit = 0; }
      const int64_t n = std::min(len - filled, elems[u] - in_unit);
      pieces.push_back({u, in_unit, n, filled});
      filled += n;
      in_unit += n;
    }
    for (const Piece& p : pieces)
      dev.copy(byte_offset(staging, gb * p.at), byte_offset(grads[p.unit], gb * p.off), gb * p.n);
    dp.all_reduce(staging, len, g);
    for (const Piece& p : pieces)
      dev.copy(byte_offset(grads[p.unit], gb * p.off), byte_offset(staging, gb * p.at), gb * p.n);
  }
}

}  // namespace gpuledger
