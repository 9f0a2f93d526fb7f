// ShapeTable: a full grid, exact at its points, between its neighbours in
// between (monotone along an axis), and silent outside its range.
#include <gtest/gtest.h>

#include <stdexcept>

#include "perf/shape_table.h"

using gpuledger::perf::ShapePoint;
using gpuledger::perf::ShapeTable;

namespace {

// 2 × 2 × 2 grid over (64, 1024) on each axis; throughput rising with every dimension.
ShapeTable grid() {
  std::vector<ShapePoint> p;
  for (int64_t a : {64, 1024})
    for (int64_t b : {64, 1024})
      for (int64_t c : {64, 1024}) p.push_back({a, b, c, 1e9 * (1 + (a == 1024) + 2 * (b == 1024) + 4 * (c == 1024))});
  return ShapeTable(p);
}

}  // namespace

TEST(ShapeTable, ExactAtEveryPoint) {
  const ShapeTable t = grid();
  for (const auto& p : t.points()) EXPECT_DOUBLE_EQ(t.at(p.a, p.b, p.c), p.per_s);
}

TEST(ShapeTable, LogSpaceMidpointIsTheMean) {
  const ShapeTable t = grid();
  // 256 is the geometric midpoint of 64 and 1024: halfway in log space.
  EXPECT_DOUBLE_EQ(t.at(256, 64, 64), 0.5 * (1e9 + 2e9));
  EXPECT_DOUBLE_EQ(t.at(256, 256, 256), (1 + 2 + 3 + 4 + 5 + 6 + 7 + 8) / 8.0 * 1e9);
}

TEST(ShapeTable, MonotoneBetweenPointsOnEachAxis) {
  const ShapeTable t = grid();
  double prev = 0;
  for (int64_t a = 64; a <= 1024; a += 32) {
    const double v = t.at(a, 64, 1024);
    EXPECT_GE(v, prev) << "a=" << a;
    EXPECT_GE(v, t.at(64, 64, 1024));
    EXPECT_LE(v, t.at(1024, 64, 1024));
    prev = v;
  }
  prev = 0;
  for (int64_t c = 64; c <= 1024; c += 64) {
    const double v = t.at(300, 700, c);
    EXPECT_GT(v, prev) << "c=" << c;
    prev = v;
  }
}

TEST(ShapeTable, CoversOnlyItsRange) {
  const ShapeTable t = grid();
  EXPECT_TRUE(t.covers(64, 1024, 500));
  EXPECT_FALSE(t.covers(63, 64, 64));
  EXPECT_FALSE(t.covers(64, 2048, 64));
  EXPECT_THROW(t.at(64, 64, 2048), std::out_of_range);
  EXPECT_FALSE(ShapeTable().covers(64, 64, 64));
}

TEST(ShapeTable, OneValueAxis) {
  const ShapeTable t({{128, 64, 64, 1e9}, {128, 64, 256, 3e9}});
  EXPECT_DOUBLE_EQ(t.at(128, 64, 128), 2e9);
  EXPECT_FALSE(t.covers(127, 64, 128));
}

TEST(ShapeTable, RefusesWhatIsNotAFullGrid) {
  EXPECT_THROW(ShapeTable({{64, 64, 64, 1e9}, {128, 128, 64, 1e9}}), std::invalid_argument);  // missing corners
  EXPECT_THROW(ShapeTable({{64, 64, 64, 1e9}, {64, 64, 64, 2e9}}), std::invalid_argument);    // twice
  EXPECT_THROW(ShapeTable({{64, 64, 64, 0.0}}), std::invalid_argument);                       // not positive
  EXPECT_THROW(ShapeTable({{0, 64, 64, 1e9}}), std::invalid_argument);                        // dimension < 1
}

TEST(ShapeTable, ClampAboveLowersOnlyWhatLiesPastTheGrid) {
  std::vector<ShapePoint> pts;
  for (int64_t a : {64, 256})
    for (int64_t b : {64, 1024})
      for (int64_t c : {128, 512}) pts.push_back({a, b, c, 1e9});
  const ShapeTable t(pts);
  EXPECT_EQ(t.clamp_above(4096, 100, 99), (std::array<int64_t, 3>{256, 100, 99}));  // 99 < 128 stays below
  EXPECT_EQ(t.clamp_above(64, 5000, 10000), (std::array<int64_t, 3>{64, 1024, 512}));
  EXPECT_EQ(ShapeTable().clamp_above(5, 6, 7), (std::array<int64_t, 3>{5, 6, 7}));
}
