// Bucketed data-parallel gradient all-reduce, overlapped with backward (see grad_buckets.h).
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

int64_t grad_bucket_staging_bytes(int64_t bucket, int64_t total_elems, bool overlap) {
  return 4 * std::min((overlap ? 2 : 1) * bucket, total_elems);
}

GradBucketReducer::GradBucketReducer(Device& dev, Comm& dp, std::vector<void*> grads,
                                     std::vector<int64_t> elems, DType g, int64_t bucket,
                                     void* staging, bool overlap)
    : dev_(dev), dp_(dp), grads_(std::move(grads)), elems_(std::move(elems)), g_(g), bucket_(bucket),
      staging_(staging), slots_(overlap ? 2 : 1) {
  if (grads_.size() != elems_.size()) throw std::invalid_argument("GradBucketReducer: grads and elems differ in length");
  if (bucket_ < 1) throw std::invalid_argument("GradBucketReducer: a bucket holds no element");
  for (int64_t n : elems_) {
    unit_start_.push_back(total_);
    total_ += n;
  }
  // bucket k = elements [k·bucket, min((k+1)·bucket, total)) of the concatenation
  size_t u = 0;
  for (int64_t start = 0; start < total_; start += bucket_) {
    while (unit_start_[u] + elems_[u] <= start) ++u;  // the unit holding element `start`
    first_unit_.push_back(u);
    const int64_t last = std::min(start + bucket_, total_) - 1;
    size_t v = u;
    while (unit_start_[v] + elems_[v] <= last) ++v;
    last_unit_.push_back(v);
  }
  ready_.assign(elems_.size(), false);
  started_.assign(first_unit_.size(), false);
  in_flight_.resize(static_cast<size_t>(slots_));
  slot_bucket_.assign(static_cast<size_t>(slots_), -1);
  slot_pieces_.resize(static_cast<size_t>(slots_));
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

std::vector<GradBucketReducer::Piece> GradBucketReducer::pieces(int64_t k) const {
  const int64_t start = k * bucket_, len = std::min(bucket_, total_ - start);
  std::vector<Piece> out;
  size_t u = first_unit_[static_cast<size_t>(k)];
  int64_t filled = 0;
  while (filled < len) {
    const int64_t in_unit = start + filled - unit_start_[u];
    if (in_unit >= elems_[u]) {
      ++u;
      continue;
    }
    const int64_t n = std::min(len - filled, elems_[u] - in_unit);
    out.push_back({u, in_unit, n, filled});
    filled += n;
  }
  return out;
}

void GradBucketReducer::start(int64_t k) {
  const int64_t slot = k % slots_;
  complete(slot);  // the bucket that held this slot (k + slots) must be back first
  const int64_t gb = dtype_bytes(g_);
  void* st = byte_offset(staging_, 4 * slot * bucket_);
  std::vector<Piece>& ps = slot_pieces_[static_cast<size_t>(slot)];
  ps = pieces(k);  // kept for the copy back in complete()
  for (const Piece& p : ps)
    dev_.copy(byte_offset(st, gb * p.at), byte_offset(grads_[p.unit], gb * p.off), gb * p.n);
  const int64_t len = std::min(bucket_, total_ - k * bucket_);
  started_[static_cast<size_t>(k)] = true;
  in_flight_[static_cast<size_t>(slot)] = dp_.all_reduce_start(st, len, g_);
  slot_bucket_[static_cast<size_t>(slot)] = k;
}

void GradBucketReducer::complete(int64_t slot) {
  const int64_t k = slot_bucket_[static_cast<size_t>(slot)];
  if (k < 0) return;
  in_flight_[static_cast<size_t>(slot)]->wait();
  in_flight_[static_cast<size_t>(slot)].reset();
  const int64_t gb = dtype_bytes(g_);
  const void* st = byte_offset(staging_, 4 * slot * bucket_);
  for (const Piece& p : slot_pieces_[static_cast<size_t>(slot)])
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
    bool all = true;
    for (size_t v = first_unit_[kk]; v <= last_unit_[kk] && all; ++v) all = ready_[v];
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
