// The grid and its trilinear interpolation in log dimensions (see shape_table.h).
#include "perf/shape_table.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace gpuledger::perf {
namespace {

std::vector<int64_t> distinct(const std::vector<ShapePoint>& p, int64_t ShapePoint::*dim) {
  std::vector<int64_t> v;
  for (const auto& x : p) v.push_back(x.*dim);
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

size_t index_of(const std::vector<int64_t>& axis, int64_t value) {
  return static_cast<size_t>(std::lower_bound(axis.begin(), axis.end(), value) - axis.begin());
}

// The grid cell [lo, lo + 1] holding x on `axis` and x's weight toward lo + 1,
// in log space; a one-value axis has one cell of weight 0.
struct Bracket {
  size_t lo = 0;
  double w = 0;
};
Bracket bracket(const std::vector<int64_t>& axis, int64_t x) {
  if (axis.size() == 1) return {0, 0.0};
  size_t hi = index_of(axis, x);
  if (hi == 0) hi = 1;
  const size_t lo = hi - 1;
  const double l0 = std::log(static_cast<double>(axis[lo])), l1 = std::log(static_cast<double>(axis[hi]));
  return {lo, (std::log(static_cast<double>(x)) - l0) / (l1 - l0)};
}

}  // namespace

ShapeTable::ShapeTable(std::vector<ShapePoint> points) : points_(std::move(points)) {
  if (points_.empty()) return;
  for (const auto& p : points_) {
    if (p.a < 1 || p.b < 1 || p.c < 1)
      throw std::invalid_argument("shape table: a dimension < 1 at (" + std::to_string(p.a) + ", " +
                                  std::to_string(p.b) + ", " + std::to_string(p.c) + ")");
    if (!(p.per_s > 0) || !std::isfinite(p.per_s))
      throw std::invalid_argument("shape table: throughput not positive and finite at (" + std::to_string(p.a) + ", " +
                                  std::to_string(p.b) + ", " + std::to_string(p.c) + ")");
  }
  axes_ = {distinct(points_, &ShapePoint::a), distinct(points_, &ShapePoint::b), distinct(points_, &ShapePoint::c)};
  const size_t na = axes_[0].size(), nb = axes_[1].size(), nc = axes_[2].size();
  if (na * nb * nc != points_.size())
    throw std::invalid_argument("shape table: " + std::to_string(points_.size()) + " points are not a full grid of " +
                                std::to_string(na) + " × " + std::to_string(nb) + " × " + std::to_string(nc));
  grid_.assign(points_.size(), 0.0);
  for (const auto& p : points_) {
    double& cell = grid_[(index_of(axes_[0], p.a) * nb + index_of(axes_[1], p.b)) * nc + index_of(axes_[2], p.c)];
    if (cell != 0.0)
      throw std::invalid_argument("shape table: (" + std::to_string(p.a) + ", " + std::to_string(p.b) + ", " +
                                  std::to_string(p.c) + ") given twice");
    cell = p.per_s;
  }
}

bool ShapeTable::covers(int64_t a, int64_t b, int64_t c) const {
  if (empty()) return false;
  const int64_t x[3] = {a, b, c};
  for (int d = 0; d < 3; ++d)
    if (x[d] < axes_[d].front() || x[d] > axes_[d].back()) return false;
  return true;
}

std::array<int64_t, 3> ShapeTable::clamp_above(int64_t a, int64_t b, int64_t c) const {
  std::array<int64_t, 3> x = {a, b, c};
  if (empty()) return x;
  for (size_t d = 0; d < 3; ++d) x[d] = std::min(x[d], axes_[d].back());
  return x;
}

double ShapeTable::at(int64_t a, int64_t b, int64_t c) const {
  if (!covers(a, b, c)) throw std::out_of_range("shape table: the shape is outside the measured grid");
  const Bracket ba = bracket(axes_[0], a), bb = bracket(axes_[1], b), bc = bracket(axes_[2], c);
  const size_t nb = axes_[1].size(), nc = axes_[2].size();
  double sum = 0;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 2; ++k) {
        const double w = (i ? ba.w : 1 - ba.w) * (j ? bb.w : 1 - bb.w) * (k ? bc.w : 1 - bc.w);
        if (w == 0) continue;  // also keeps a one-value axis from reading past its end
        sum += w * grid_[((ba.lo + i) * nb + bb.lo + j) * nc + bc.lo + k];
      }
  return sum;
}

double ShapeTable::best_per_s() const {
  double best = 0;
  for (const auto& p : points_) best = std::max(best, p.per_s);
  return best;
}

}  // namespace gpuledger::perf
