// Data-parallel gradient reduction plans and their execution, overlapped with
// the backward (see grad_buckets.h).
#include "parallel/dp/grad_buckets.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "core/int_math.h"
#include "models/transformer/params.h"

namespace gpuledger {

int64_t bucket_elems(double bucket_mb, int64_t grad_bytes) {
  const auto n = static_cast<int64_t>(std::floor(bucket_mb * 1048576.0 / static_cast<double>(grad_bytes)));
  if (n < 1) throw std::invalid_argument("--bucket-mb " + std::to_string(bucket_mb) + " holds no gradient element");
  return n;
}

int64_t grad_bucket_staging_bytes(int64_t bucket, int64_t total_elems, bool overlap) {
  return 4 * std::min((overlap ? 2 : 1) * bucket, total_elems);
}

GradReductionPlan all_reduce_plan(const std::vector<int64_t>& elems, int64_t bucket, bool overlap) {
  std::vector<UnitRange> ranges;
  for (size_t u = 0; u < elems.size(); ++u) ranges.push_back({u, 0, elems[u]});
  return all_reduce_plan(ranges, bucket, overlap);
}

GradReductionPlan all_reduce_plan(const std::vector<UnitRange>& ranges, int64_t bucket, bool overlap) {
  if (bucket < 1) throw std::invalid_argument("all_reduce_plan: a bucket holds no element");
  GradReductionPlan plan;
  plan.kind = CommKind::kAllReduce;
  plan.slot_elems = bucket;
  int64_t total = 0;
  for (const UnitRange& r : ranges) total += r.n;
  plan.staging_bytes = grad_bucket_staging_bytes(bucket, total, overlap);
  // bucket k = elements [k·bucket, min((k+1)·bucket, total)) of the concatenation
  size_t i = 0;
  int64_t used = 0;  // elements of ranges[i] already in a bucket
  for (int64_t start = 0; start < total; start += bucket) {
    GradBucket b;
    b.count = std::min(bucket, total - start);
    for (int64_t filled = 0; filled < b.count;) {
      if (used >= ranges[i].n) {
        ++i;
        used = 0;
        continue;
      }
      const UnitRange& r = ranges[i];
      const int64_t n = std::min(b.count - filled, r.n - used);
      if (b.in.empty()) b.first_unit = r.unit;
      b.last_unit = r.unit;
      b.in.push_back({r.unit, r.off + used, n, filled});
      filled += n;
      used += n;
    }
    b.out = b.in;
    plan.buckets.push_back(std::move(b));
  }
  return plan;
}

GradReductionPlan reduce_scatter_plan(const std::vector<int64_t>& elems, int64_t n, int64_t rank, int64_t bucket,
                                      bool overlap) {
  std::vector<UnitRange> ranges;
  for (size_t u = 0; u < elems.size(); ++u) ranges.push_back({u, 0, elems[u]});
  return reduce_scatter_plan(ranges, n, rank, bucket, overlap);
}

GradReductionPlan reduce_scatter_plan(const std::vector<UnitRange>& ranges, int64_t n, int64_t rank, int64_t bucket,
                                      bool overlap) {
  if (n < 1 || rank < 0 || rank >= n) throw std::invalid_argument("reduce_scatter_plan: rank outside the group");
  if (bucket < 1) throw std::invalid_argument("reduce_scatter_plan: a bucket holds no element");
  GradReductionPlan plan;
  plan.kind = CommKind::kReduceScatter;
  const int64_t piece = std::max<int64_t>(1, bucket / n);
  int64_t largest_shard = 0;
  for (const UnitRange& r : ranges) largest_shard = std::max(largest_shard, ceil_div(r.n, n));
  plan.slot_elems = n * std::min(piece, largest_shard);
  plan.staging_bytes = 4 * (overlap ? 2 : 1) * plan.slot_elems;
  // The elements of segment [begin, begin + len) of a range of p elements that exist (the rest is padding).
  auto valid = [](int64_t p, int64_t begin, int64_t len) { return std::clamp<int64_t>(p - begin, 0, len); };
  for (const UnitRange& r : ranges) {
    const int64_t shard = ceil_div(r.n, n);
    for (int64_t j = 0; j * piece < shard; ++j) {
      GradBucket b;
      b.first_unit = b.last_unit = r.unit;
      b.count = std::min(piece, shard - j * piece);
      for (int64_t k = 0; k < n; ++k) {  // rank k's segment of this piece
        const int64_t begin = k * shard + j * piece, m = valid(r.n, begin, b.count);
        if (m > 0) b.in.push_back({r.unit, r.off + begin, m, k * b.count});
        if (m < b.count) b.padded = true;
      }
      const int64_t mine = rank * shard + j * piece, m = valid(r.n, mine, b.count);
      if (m > 0) b.out.push_back({r.unit, r.off + mine, m, 0});  // the sum lands at the slot's start
      plan.buckets.push_back(std::move(b));
    }
  }
  return plan;
}

GradBucketReducer::GradBucketReducer(Device& dev, Comm& dp, std::vector<void*> grads, DType g, GradReductionPlan plan,
                                     void* staging, bool overlap)
    : dev_(dev),
      dp_(dp),
      grads_(std::move(grads)),
      g_(g),
      plan_(std::move(plan)),
      staging_(staging),
      slots_(overlap ? 2 : 1) {
  if (plan_.kind != CommKind::kAllReduce && plan_.kind != CommKind::kReduceScatter)
    throw std::invalid_argument("GradBucketReducer: a plan reduces with all_reduce or reduce_scatter");
  for (const GradBucket& b : plan_.buckets)
    if (b.last_unit >= grads_.size()) throw std::invalid_argument("GradBucketReducer: a bucket reads no unit held");
  ready_.assign(grads_.size(), false);
  started_.assign(plan_.buckets.size(), false);
  in_flight_.resize(static_cast<size_t>(slots_));
  slot_bucket_.assign(static_cast<size_t>(slots_), -1);
}

GradBucketReducer::GradBucketReducer(Device& dev, Comm& dp, std::vector<void*> grads, std::vector<int64_t> elems,
                                     DType g, int64_t bucket, void* staging, bool overlap)
    : GradBucketReducer(dev, dp, std::move(grads), g, all_reduce_plan(elems, bucket, overlap), staging, overlap) {
  if (grads_.size() != elems.size()) throw std::invalid_argument("GradBucketReducer: grads and elems differ in length");
}

GradBucketReducer::~GradBucketReducer() {
  for (auto& r : in_flight_) {
    if (!r) continue;
    try {
      r->wait();
    } catch (...) {
      // already failing: the step's exception is the one that matters
    }
  }
}

void* GradBucketReducer::slot_data(int64_t slot) const { return byte_offset(staging_, 4 * slot * plan_.slot_elems); }

void GradBucketReducer::start(int64_t k) {
  const int64_t slot = k % slots_;
  complete(slot);  // the bucket that held this slot (k + slots) must be back first
  const GradBucket& b = plan_.buckets[static_cast<size_t>(k)];
  const int64_t gb = dtype_bytes(g_);
  void* st = slot_data(slot);
  const int64_t slot_count = plan_.kind == CommKind::kReduceScatter ? b.count * dp_.size() : b.count;
  if (b.padded) dev_.fill_zero(st, gb * slot_count);
  for (const GradPiece& p : b.in)
    dev_.copy(byte_offset(st, gb * p.at), byte_offset(grads_[p.unit], gb * p.off), gb * p.n);
  started_[static_cast<size_t>(k)] = true;
  in_flight_[static_cast<size_t>(slot)] = plan_.kind == CommKind::kReduceScatter
                                              ? dp_.reduce_scatter_start(st, st, b.count, g_)
                                              : dp_.all_reduce_start(st, b.count, g_);
  slot_bucket_[static_cast<size_t>(slot)] = k;
}

void GradBucketReducer::complete(int64_t slot) {
  const int64_t k = slot_bucket_[static_cast<size_t>(slot)];
  if (k < 0) return;
  in_flight_[static_cast<size_t>(slot)]->wait();
  in_flight_[static_cast<size_t>(slot)].reset();
  const int64_t gb = dtype_bytes(g_);
  const void* st = slot_data(slot);
  for (const GradPiece& p : plan_.buckets[static_cast<size_t>(k)].out)
    dev_.copy(byte_offset(grads_[p.unit], gb * p.off), byte_offset(st, gb * p.at), gb * p.n);
  slot_bucket_[static_cast<size_t>(slot)] = -1;
}

void GradBucketReducer::unit_ready(size_t u) {
  if (u >= ready_.size()) throw std::out_of_range("GradBucketReducer::unit_ready: unit " + std::to_string(u));
  ready_[u] = true;
  if (slots_ < 2) return;  // no overlap: everything starts in finish()
  for (int64_t k = buckets() - 1; k >= 0; --k) {
    const auto kk = static_cast<size_t>(k);
    if (started_[kk]) continue;
    const GradBucket& b = plan_.buckets[kk];
    bool all = true;
    for (size_t v = b.first_unit; v <= b.last_unit && all; ++v) all = ready_[v];
    if (all) start(k);
  }
}

void GradBucketReducer::progress() {
  for (auto& r : in_flight_)
    if (r) r->test();
}

void GradBucketReducer::finish() {
  for (int64_t k = buckets() - 1; k >= 0; --k)
    if (!started_[static_cast<size_t>(k)]) start(k);
  for (int64_t s = 0; s < slots_; ++s) complete(s);
}

}  // namespace gpuledger
