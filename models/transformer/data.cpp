// BigramData (see data.h): the successor table and the per-sequence Philox draws.
#include "models/transformer/data.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/philox.h"

namespace gpuledger {
namespace {

// A 32-bit word -> [0, V): the high half of word·V (Lemire 2019, "Fast random
// integer generation in an interval", the multiply-shift map; its bias, < V/2³²,
// is irrelevant here).
inline int32_t word_to_token(uint32_t word, int64_t vocab) {
  return static_cast<int32_t>((static_cast<uint64_t>(word) * static_cast<uint64_t>(vocab)) >> 32);
}

}  // namespace

BigramData::BigramData(int64_t vocab, uint64_t seed) : vocab_(vocab), key_(seed ^ kDataSeedSalt) {
  if (vocab < 1 || vocab > (int64_t{1} << 31) - 1)
    throw std::invalid_argument("BigramData: vocab must be in [1, 2^31), got " + std::to_string(vocab));
  succ_.resize(static_cast<size_t>(vocab));
  for (int64_t v = 0; v < vocab; ++v)
    succ_[static_cast<size_t>(v)] =
        word_to_token(philox_block(key_, kSuccessorStream, static_cast<uint64_t>(v)).w[0], vocab);
}

void BigramData::sequences(int64_t step, int64_t gbs, int64_t first, int64_t count, int64_t seq, int32_t* out) const {
  if (step < 0 || gbs < 1 || first < 0 || count < 0 || first + count > gbs || seq < 1)
    throw std::invalid_argument("BigramData::sequences: bad range (step " + std::to_string(step) + ", gbs " +
                                std::to_string(gbs) + ", first " + std::to_string(first) + ", count " +
                                std::to_string(count) + ", seq " + std::to_string(seq) + ")");
  // Uniform in [0, 1) from the top 24 bits (philox.h's mapping), compared with 0.75.
  const auto follow_threshold = static_cast<uint32_t>(kFollowProb * 16777216.0);
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t stream = static_cast<uint64_t>(step) * static_cast<uint64_t>(gbs) + static_cast<uint64_t>(first + i);
    int32_t* row = out + i * (seq + 1);
    for (int64_t p = 0; p <= seq; ++p) {
      const Philox4x32Block b = philox_block(key_, stream, static_cast<uint64_t>(p));
      const bool follow = p > 0 && (b.w[0] >> 8) < follow_threshold;
      row[p] = follow ? succ_[static_cast<size_t>(row[p - 1])] : word_to_token(b.w[1], vocab_);
    }
  }
}

void BigramData::batch(int64_t step, int64_t gbs, int64_t first, int64_t count, int64_t seq, int32_t* inputs,
                       int32_t* targets) const {
  std::vector<int32_t> tok(static_cast<size_t>(count * (seq + 1)));
  sequences(step, gbs, first, count, seq, tok.data());
  for (int64_t i = 0; i < count; ++i)
    for (int64_t p = 0; p < seq; ++p) {
      inputs[i * seq + p] = tok[static_cast<size_t>(i * (seq + 1) + p)];
      targets[i * seq + p] = tok[static_cast<size_t>(i * (seq + 1) + p + 1)];
    }
}

double bigram_entropy_rate_nats(int64_t vocab, double follow) {
  const double v = static_cast<double>(vocab);
  const double q = (1.0 - follow) / v;  // any particular token by the uniform draw
  const double p1 = follow + q;         // the successor
  double h = -p1 * std::log(p1);
  if (q > 0) h -= (v - 1.0) * q * std::log(q);
  return h;
}

}  // namespace gpuledger
