// Philox4x32-10 (kernels/philox.h): Random123's published known-answer vectors,
// the (seed, stream, index) -> uniform mapping, and basic uniformity.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <stdexcept>
#include <vector>

#include "kernels/philox.h"

namespace gpuledger {
namespace {

// Random123 (D. E. Shaw Research), tests/kat_vectors, the three "philox4x32 10"
// lines: counter (4 words), key (2 words) -> expected (4 words).
struct Kat {
  uint32_t ctr[4], key[2], out[4];
};
constexpr Kat kKats[] = {
    {{0x00000000, 0x00000000, 0x00000000, 0x00000000},
     {0x00000000, 0x00000000},
     {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
     {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
     {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

TEST(Philox, Random123KnownAnswers) {
  for (const Kat& k : kKats) {
    const Philox4x32Block b = philox4x32_10(k.ctr[0], k.ctr[1], k.ctr[2], k.ctr[3], k.key[0], k.key[1]);
    for (int w = 0; w < 4; ++w) EXPECT_EQ(b.w[w], k.out[w]) << "word " << w;
  }
}

// seed 0, stream 0, elements 0..3 are block (counter 0, key 0): the first KAT
// vector, each word's top 24 bits over 2²⁴.
TEST(Philox, UniformOfZeroKeyIsTheKatVector) {
  for (int i = 0; i < 4; ++i) {
    const float expected = static_cast<float>(kKats[0].out[i] >> 8) / 16777216.0f;
    EXPECT_EQ(philox_uniform(0, 0, i), expected) << "element " << i;
  }
  // Hand-computed: 0x6627e8d5 >> 8 = 0x6627e8 = 6694888; / 2^24 = 0.3990464210510254.
  EXPECT_EQ(philox_uniform(0, 0, 0), 0.3990464210510254f);
}

// Key = (seed lo, seed hi), counter = ((i/4) lo, (i/4) hi, stream lo, stream hi), word i % 4.
TEST(Philox, IndexSeedAndStreamLandInTheirWords) {
  const uint64_t seed = 0x299f31d0a4093822ull, stream = 0x0370734413198a2eull;
  const uint64_t block = 0x00000001243f6a88ull;  // a block index above 2^32
  const Philox4x32Block b = philox4x32_10(0x243f6a88, 0x00000001, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0);
  for (int w = 0; w < 4; ++w)
    EXPECT_EQ(philox_uniform(seed, stream, block * 4 + w), static_cast<float>(b.w[w] >> 8) / 16777216.0f);
}

TEST(Philox, FillMatchesElementwiseAtAnyOffset) {
  std::vector<float> u(23);
  for (uint64_t first : {0ull, 1ull, 2ull, 3ull, 4ull, 1000001ull}) {
    philox_uniform_fill(7, 11, first, static_cast<int64_t>(u.size()), u.data());
    for (size_t i = 0; i < u.size(); ++i) EXPECT_EQ(u[i], philox_uniform(7, 11, first + i));
  }
}

// Mean of n uniforms: σ = 1/√(12n) = 9.1e-4 at n = 1e5; the 0.01 bound is ~11σ.
TEST(Philox, UniformsAreInRangeWithMeanOneHalf) {
  const int64_t n = 100000;
  std::vector<float> u(n);
  philox_uniform_fill(1234, 5, 0, n, u.data());
  double sum = 0;
  for (float x : u) {
    ASSERT_GE(x, 0.0f);
    ASSERT_LT(x, 1.0f);
    sum += x;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.01);
  // Different streams and seeds give different sequences.
  EXPECT_NE(philox_uniform(1234, 5, 0), philox_uniform(1234, 6, 0));
  EXPECT_NE(philox_uniform(1234, 5, 0), philox_uniform(1235, 5, 0));
}

TEST(Philox, StreamIdsPackFieldsWithoutCollisions) {
  EXPECT_EQ(rng_stream_id(0, 0, 0, 0), 0u);
  EXPECT_EQ(rng_stream_id(1, 0, 0, 0), uint64_t{1} << 40);
  EXPECT_EQ(rng_stream_id(0, 1, 0, 0), uint64_t{1} << 24);
  EXPECT_EQ(rng_stream_id(0, 0, 1, 0), uint64_t{1} << 8);
  EXPECT_EQ(rng_stream_id(0, 0, 0, 1), 1u);
  EXPECT_EQ(rng_stream_id(3, 2, 5, 7), (uint64_t{3} << 40) | (uint64_t{2} << 24) | (5u << 8) | 7u);
  std::set<uint64_t> ids;
  for (uint64_t step = 0; step < 4; ++step)
    for (uint64_t mb = 0; mb < 4; ++mb)
      for (uint64_t layer = 0; layer < 4; ++layer)
        for (uint64_t site = 0; site < 4; ++site) ids.insert(rng_stream_id(step, mb, layer, site));
  EXPECT_EQ(ids.size(), 256u);
  EXPECT_EQ(rng_stream_id((1u << 24) - 1, (1u << 16) - 1, (1u << 16) - 1, 255), ~uint64_t{0});
  EXPECT_THROW(rng_stream_id(1u << 24, 0, 0, 0), std::out_of_range);
  EXPECT_THROW(rng_stream_id(0, 1u << 16, 0, 0), std::out_of_range);
  EXPECT_THROW(rng_stream_id(0, 0, 1u << 16, 0), std::out_of_range);
  EXPECT_THROW(rng_stream_id(0, 0, 0, 256), std::out_of_range);
}

}  // namespace
}  // namespace gpuledger
