// A throughput measured over a full grid of three integer dimensions — GEMM
// (m, n, k), attention (seq, heads, head_dim) — and its interpolation.
//
// Interpolation: trilinear in (log a, log b, log c) on the throughput (per
// second), between the grid's neighbouring values. Why this rule:
//   - log space, because measurement grids are geometric (64, 256, 1024 …)
//     and a kernel's efficiency changes over decades of size, not in steps
//     of constant width;
//   - on the throughput, not the time, because at a fixed throughput the time
//     scales exactly with the FLOPs (time = flops / throughput), so a shape
//     between two measured ones is never charged less work than it has;
//   - linear between neighbours, so the result is exact at every table point
//     and lies between its neighbours' values (monotone on each axis between
//     two grid values), never overshooting as a higher-order fit could.
// Outside the grid's range on any axis the table says nothing (covers() is
// false): the caller falls back to its roofline (perf/op_time.h), rather than
// extrapolating a fit past what was measured.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

namespace gpuledger::perf {

struct ShapePoint {
  int64_t a = 0, b = 0, c = 0;
  double per_s = 0;  // FLOP/s achieved at this shape
  bool operator==(const ShapePoint&) const = default;
};

class ShapeTable {
 public:
  ShapeTable() = default;
  // Throws std::invalid_argument unless the points are a full grid (every
  // combination of the distinct a, b and c values exactly once), every
  // dimension >= 1 and every throughput > 0 and finite. An empty list is an
  // empty table.
  explicit ShapeTable(std::vector<ShapePoint> points);

  bool empty() const { return points_.empty(); }
  const std::vector<ShapePoint>& points() const { return points_; }  // as given
  // Within [min, max] of the grid on every axis.
  bool covers(int64_t a, int64_t b, int64_t c) const;
  // (a, b, c) with every dimension above the grid's largest value on its axis
  // lowered to that value; a dimension below the grid stays below it.
  std::array<int64_t, 3> clamp_above(int64_t a, int64_t b, int64_t c) const;
  // The interpolated throughput; throws std::out_of_range when !covers.
  double at(int64_t a, int64_t b, int64_t c) const;
  double best_per_s() const;  // the largest measured throughput; 0 when empty

  bool operator==(const ShapeTable& o) const { return points_ == o.points_; }

 private:
  std::vector<ShapePoint> points_;
  std::array<std::vector<int64_t>, 3> axes_;  // distinct values, ascending
  std::vector<double> grid_;                  // grid_[(i·nb + j)·nc + k]
};

}  // namespace gpuledger::perf
