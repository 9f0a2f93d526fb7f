// Philox4x32-10, the counter-based RNG every backend draws dropout masks from
// (Salmon, Moraes, Dror & Shaw 2011, "Parallel random numbers: as easy as 1, 2,
// 3", SC'11), and the mapping from (RngKey, element index) to a uniform
// float. Header-only and free of host-only calls, so CUDA kernels include the
// same code: the CPU and CUDA backends, and a recompute, draw identical masks.
//
// Mapping (device.h, RngKey): element i of a draw under {seed, stream} is
//   key     = (seed lo32, seed hi32)
//   counter = ((i/4) lo32, (i/4) hi32, stream lo32, stream hi32)
//   word    = philox4x32_10(counter, key)[i % 4]
//   u       = (word >> 8) · 2⁻²⁴        in [0, 1), 24 bits (a float's mantissa)
// so four consecutive elements share one Philox block.
#pragma once
#include <cstdint>
#include <stdexcept>

#include "core/host_device.h"

namespace gpuledger {

struct Philox4x32Block {
  uint32_t w[4];
};

namespace philox_detail {
// Multipliers and Weyl key increments of Philox4x32 (Salmon et al. 2011; the
// same constants as Random123's philox.h). W0, W1 are the golden ratio − 1 and
// √3 − 1 in 0.32 fixed point.
inline constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
inline constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;

// One S-box round: two 32×32→64 multiplies, the high halves xored with the
// other words and the key, then the word permutation of the paper.
GPL_HOST_DEVICE void round(uint32_t c[4], uint32_t k0, uint32_t k1) {
  const uint64_t p0 = static_cast<uint64_t>(kM0) * c[0];
  const uint64_t p1 = static_cast<uint64_t>(kM1) * c[2];
  const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
  const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
  const uint32_t n0 = hi1 ^ c[1] ^ k0, n2 = hi0 ^ c[3] ^ k1;
  c[0] = n0;
  c[1] = lo1;
  c[2] = n2;
  c[3] = lo0;
}
}  // namespace philox_detail

// The bijection itself: 10 rounds, the key bumped by (W0, W1) between rounds
// (the first round uses the key as given), as Random123's philox4x32_R(10, …).
GPL_HOST_DEVICE Philox4x32Block philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                                              uint32_t k1) {
  uint32_t c[4] = {c0, c1, c2, c3};
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += philox_detail::kW0;
      k1 += philox_detail::kW1;
    }
    philox_detail::round(c, k0, k1);
  }
  return Philox4x32Block{{c[0], c[1], c[2], c[3]}};
}

// The Philox block holding elements 4·block … 4·block + 3 of the draw {seed, stream}.
GPL_HOST_DEVICE Philox4x32Block philox_block(uint64_t seed, uint64_t stream, uint64_t block) {
  return philox4x32_10(static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), static_cast<uint32_t>(stream),
                       static_cast<uint32_t>(stream >> 32), static_cast<uint32_t>(seed),
                       static_cast<uint32_t>(seed >> 32));
}

// 32 random bits -> [0, 1) with 24 bits: every value is exactly representable
// in a float, and 1.0 is never reached (rounding a 32-bit fraction could reach it).
GPL_HOST_DEVICE float philox_word_to_uniform(uint32_t word) {
  return static_cast<float>(word >> 8) * (1.0f / 16777216.0f);
}

// Uniform of element `index` of the draw {seed, stream}.
GPL_HOST_DEVICE float philox_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  const Philox4x32Block b = philox_block(seed, stream, index >> 2);
  return philox_word_to_uniform(b.w[index & 3]);
}

// Uniforms of elements first … first + n − 1 into out[0 … n−1], one Philox call
// per four elements (the same values as n calls of philox_uniform).
GPL_HOST_DEVICE void philox_uniform_fill(uint64_t seed, uint64_t stream, uint64_t first, int64_t n, float* out) {
  int64_t done = 0;
  while (done < n) {
    const uint64_t index = first + static_cast<uint64_t>(done);
    const Philox4x32Block b = philox_block(seed, stream, index >> 2);
    for (uint32_t w = static_cast<uint32_t>(index & 3); w < 4 && done < n; ++w, ++done)
      out[done] = philox_word_to_uniform(b.w[w]);
  }
}

// The stream id of one dropout site: fields packed into disjoint bit ranges, so
// distinct (step, microbatch, layer, site) tuples never share a stream (a hash
// could collide; a counter-based RNG is designed to take plain, structured
// counters and keys, Salmon et al. 2011):
//   bits 40–63 step (< 2²⁴), 24–39 microbatch (< 2¹⁶), 8–23 layer (< 2¹⁶),
//   0–7 site (< 2⁸; e.g. embedding, attention probabilities, attention out, MLP).
// The microbatch must be the global one (same across layouts) for every layout
// to draw the same masks. Host-only: throws std::out_of_range when a field
// does not fit its bits.
inline uint64_t rng_stream_id(uint64_t step, uint64_t microbatch, uint64_t layer, uint64_t site) {
  if (step >= (uint64_t{1} << 24) || microbatch >= (uint64_t{1} << 16) || layer >= (uint64_t{1} << 16) ||
      site >= (uint64_t{1} << 8))
    throw std::out_of_range(
        "rng_stream_id: a field exceeds its bits (step < 2^24, microbatch < "
        "2^16, layer < 2^16, site < 2^8)");
  return (step << 40) | (microbatch << 24) | (layer << 8) | site;
}

}  // namespace gpuledger
