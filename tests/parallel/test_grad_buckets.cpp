// GradBucketReducer (parallel/dp/grad_buckets.h) on one process, against a
// recording comm that stands for a dp group of two identical replicas: a
// started all-reduce captures its buffer and, when waited for, writes back
// twice what it captured — so a slot reused before its reduction completed, or
// a bucket copied back from the wrong place, shows in the result. Checked: the
// buckets and their lengths, the order they start in as units become final
// (from the last bucket down, a held-back unit holding back only the buckets
// touching it), at most two in flight, and the staging size.
#include "kernels/registry/registry.h"
#include "parallel/dp/grad_buckets.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/device.h"
#include "kernels/ledger.h"

namespace gpuledger {
namespace {

struct Started {
  int64_t elems;
  float first_value;  // identifies the bucket: the value of its first element
};

class DoublingComm final : public Comm {
 public:
  explicit DoublingComm(CommCounters& c) : Comm("dp", c) {}
  int64_t size() const override { return 2; }
  int64_t rank() const override { return 0; }
  void all_reduce(void* buf, int64_t n, DType t, ReduceOp) override {
    auto* f = static_cast<float*>(buf);
    for (int64_t i = 0; i < n; ++i) f[i] *= 2;
  }
  void all_gather(void*, const void*, int64_t, DType) override {}
  void reduce_scatter(void*, const void*, int64_t, DType) override {}
  void all_to_all(void*, const void*, int64_t, DType) override {}
  void broadcast(void*, int64_t, DType, int64_t) override {}
  void send(const void*, int64_t, DType, int64_t) override {}
  void recv(void*, int64_t, DType, int64_t) override {}
  void barrier() override {}

  class Request final : public CommRequest {
   public:
    Request(DoublingComm& c, float* buf, std::vector<float> captured)
        : comm_(c), buf_(buf), captured_(std::move(captured)) {}
    ~Request() override { wait(); }
    void wait() override {
      if (done_) return;
      for (size_t i = 0; i < captured_.size(); ++i) buf_[i] = 2 * captured_[i];
      done_ = true;
      --comm_.in_flight;
    }
    bool test() override { return done_; }

   private:
    DoublingComm& comm_;
    float* buf_;
    std::vector<float> captured_;
    bool done_ = false;
  };
  CommHandle all_reduce_start(void* buf, int64_t n, DType t, ReduceOp) override {
    EXPECT_EQ(t, DType::kFP32);
    auto* f = static_cast<float*>(buf);
    started.push_back({n, f[0]});
    ++in_flight;
    max_in_flight = std::max(max_in_flight, in_flight);
    // scribble over the buffer: the reducer must not read it before wait()
    std::vector<float> captured(f, f + n);
    for (int64_t i = 0; i < n; ++i) f[i] = -1e9f;
    return std::make_unique<Request>(*this, f, std::move(captured));
  }
  std::vector<Started> started;
  int64_t in_flight = 0, max_in_flight = 0;
};

// Units of 5, 3, 8 and 4 elements (20 in all), buckets of 6: [0,6) [6,12)
// [12,18) [18,20). Element i of the concatenation holds i + 1.
struct Rig {
  Ledger ledger;
  std::unique_ptr<Device> dev = make_device("cpu", ledger);
  CommCounters counters;
  DoublingComm comm{counters};
  std::vector<int64_t> elems{5, 3, 8, 4};
  std::vector<std::vector<float>> grads;
  std::vector<float> staging;
  Rig(bool overlap) {
    float v = 1;
    for (int64_t n : elems) {
      grads.emplace_back(n);
      for (auto& x : grads.back()) x = v++;
    }
    staging.assign(grad_bucket_staging_bytes(6, 20, overlap) / 4, 0.0f);
  }
  std::vector<void*> ptrs() {
    std::vector<void*> p;
    for (auto& g : grads) p.push_back(g.data());
    return p;
  }
  void expect_doubled() {
    float v = 1;
    for (auto& g : grads)
      for (float x : g) {
        EXPECT_EQ(x, 2 * v);
        ++v;
      }
  }
};

TEST(GradBuckets, StagingIsOneOrTwoBucketsCappedAtTheRanksElements) {
  EXPECT_EQ(grad_bucket_staging_bytes(6, 20, false), 4 * 6);
  EXPECT_EQ(grad_bucket_staging_bytes(6, 20, true), 4 * 12);
  EXPECT_EQ(grad_bucket_staging_bytes(6, 9, true), 4 * 9);  // two buckets: 6 + 3
  EXPECT_EQ(grad_bucket_staging_bytes(6, 4, true), 4 * 4);  // one bucket
  EXPECT_EQ(bucket_elems(1.0, 2), 524288);                  // 2²⁰ / 2
  EXPECT_THROW(bucket_elems(1e-7, 4), std::invalid_argument);
}

TEST(GradBuckets, OverlapStartsBucketsAsTheirUnitsBecomeFinal) {
  Rig rig(true);
  GradBucketReducer red(*rig.dev, rig.comm, rig.ptrs(), rig.elems, DType::kFP32, 6, rig.staging.data(), true);
  EXPECT_EQ(red.buckets(), 4);
  red.unit_ready(3);  // elements [16, 20): bucket 3 = [18, 20) is complete
  ASSERT_EQ(rig.comm.started.size(), 1u);
  EXPECT_EQ(rig.comm.started[0].elems, 2);
  EXPECT_EQ(rig.comm.started[0].first_value, 19.0f);
  red.unit_ready(2);  // [8, 16): bucket 2 = [12, 18) complete; [6, 12) needs unit 1
  ASSERT_EQ(rig.comm.started.size(), 2u);
  EXPECT_EQ(rig.comm.started[1].first_value, 13.0f);
  red.progress();
  red.unit_ready(1);  // bucket 1 = [6, 12): slot 1 held bucket 3, waited for first
  ASSERT_EQ(rig.comm.started.size(), 3u);
  EXPECT_EQ(rig.comm.started[2].first_value, 7.0f);
  EXPECT_EQ(rig.comm.started[2].elems, 6);
  red.unit_ready(0);
  ASSERT_EQ(rig.comm.started.size(), 4u);
  EXPECT_EQ(rig.comm.started[3].first_value, 1.0f);
  red.finish();
  EXPECT_LE(rig.comm.max_in_flight, 2);
  EXPECT_EQ(rig.comm.in_flight, 0);
  rig.expect_doubled();
}

TEST(GradBuckets, AHeldBackUnitHoldsBackOnlyTheBucketsTouchingIt) {
  Rig rig(true);
  GradBucketReducer red(*rig.dev, rig.comm, rig.ptrs(), rig.elems, DType::kFP32, 6, rig.staging.data(), true);
  // Unit 3 = [16, 20) (a tied copy) is held back: buckets 3 = [18, 20) and
  // 2 = [12, 18) touch it and wait; bucket 1 = [6, 12) (units 1, 2) does not.
  red.unit_ready(2);
  red.unit_ready(1);
  ASSERT_EQ(rig.comm.started.size(), 1u);
  EXPECT_EQ(rig.comm.started[0].first_value, 7.0f);
  red.unit_ready(0);
  ASSERT_EQ(rig.comm.started.size(), 2u);
  EXPECT_EQ(rig.comm.started[1].first_value, 1.0f);
  red.unit_ready(3);
  red.finish();
  ASSERT_EQ(rig.comm.started.size(), 4u);
  EXPECT_EQ(rig.comm.started[2].first_value, 19.0f);
  EXPECT_EQ(rig.comm.started[3].first_value, 13.0f);
  rig.expect_doubled();
}

TEST(GradBuckets, WithoutOverlapEverythingRunsInFinishOneAtATime) {
  Rig rig(false);
  GradBucketReducer red(*rig.dev, rig.comm, rig.ptrs(), rig.elems, DType::kFP32, 6, rig.staging.data(), false);
  for (size_t u = 4; u-- > 0;) red.unit_ready(u);
  EXPECT_TRUE(rig.comm.started.empty());
  red.finish();
  ASSERT_EQ(rig.comm.started.size(), 4u);
  EXPECT_EQ(rig.comm.max_in_flight, 1);
  const std::vector<int64_t> lens{2, 6, 6, 6};
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(rig.comm.started[i].elems, lens[i]);
  rig.expect_doubled();
}

// ZeRO 1's plan (grad_buckets.h reduce_scatter_plan): units of 5 and 8
// elements over n = 2, rank 1, buckets of 4 elements: pieces of ⌊4/2⌋ = 2
// shard elements. Unit 0: shards of 3 ([0, 3) and [3, 5) + 1 padding); unit 1:
// shards of 4 ([0, 4), [4, 8)). Each piece copies the same shard elements of
// both ranks side by side; rank 1 takes the first `count` back into its shard.
TEST(GradBuckets, ReduceScatterPlanCutsEachUnitsShardsIntoPieces) {
  const GradReductionPlan p = reduce_scatter_plan({5, 8}, 2, 1, 4, /*overlap=*/true);
  EXPECT_EQ(p.kind, CommKind::kReduceScatter);
  ASSERT_EQ(p.buckets.size(), 4u);
  auto same = [](const GradPiece& a, const GradPiece& b) {
    return a.unit == b.unit && a.off == b.off && a.n == b.n && a.at == b.at;
  };
  auto expect = [&](const GradBucket& b, size_t unit, int64_t count, bool padded, std::vector<GradPiece> in,
                    std::vector<GradPiece> out) {
    EXPECT_EQ(b.first_unit, unit);
    EXPECT_EQ(b.last_unit, unit);
    EXPECT_EQ(b.count, count);
    EXPECT_EQ(b.padded, padded);
    ASSERT_EQ(b.in.size(), in.size());
    for (size_t i = 0; i < in.size(); ++i) EXPECT_TRUE(same(b.in[i], in[i])) << "in " << i;
    ASSERT_EQ(b.out.size(), out.size());
    for (size_t i = 0; i < out.size(); ++i) EXPECT_TRUE(same(b.out[i], out[i])) << "out " << i;
  };
  expect(p.buckets[0], 0, 2, false, {{0, 0, 2, 0}, {0, 3, 2, 2}}, {{0, 3, 2, 0}});
  expect(p.buckets[1], 0, 1, true, {{0, 2, 1, 0}}, {});  // rank 1's element 5 is padding
  expect(p.buckets[2], 1, 2, false, {{1, 0, 2, 0}, {1, 4, 2, 2}}, {{1, 4, 2, 0}});
  expect(p.buckets[3], 1, 2, false, {{1, 2, 2, 0}, {1, 6, 2, 2}}, {{1, 6, 2, 0}});
  // slots of n · min(piece, largest shard) = 4 elements, two of them, fp32
  EXPECT_EQ(p.slot_elems, 4);
  EXPECT_EQ(p.staging_bytes, 4 * 2 * 4);
  EXPECT_EQ(reduce_scatter_plan({5, 8}, 2, 0, 4, /*overlap=*/false).staging_bytes, 4 * 4);
  // a bucket larger than every shard: one piece per unit, slots of n · largest shard
  const GradReductionPlan whole = reduce_scatter_plan({5, 8}, 2, 0, 1000, true);
  ASSERT_EQ(whole.buckets.size(), 2u);
  EXPECT_EQ(whole.slot_elems, 8);
  EXPECT_EQ(whole.buckets[0].count, 3);
}

// The all-reduce plan is the old bucket cut: [0, 6), [6, 12), [12, 18), [18, 20)
// over units of 4, 7, 5 and 4 elements.
TEST(GradBuckets, AllReducePlanCutsTheConcatenation) {
  const GradReductionPlan p = all_reduce_plan({4, 7, 5, 4}, 6, true);
  ASSERT_EQ(p.buckets.size(), 4u);
  EXPECT_EQ(p.buckets[0].first_unit, 0u);
  EXPECT_EQ(p.buckets[0].last_unit, 1u);
  EXPECT_EQ(p.buckets[1].first_unit, 1u);
  EXPECT_EQ(p.buckets[1].last_unit, 2u);
  EXPECT_EQ(p.buckets[3].count, 2);
  EXPECT_EQ(p.staging_bytes, grad_bucket_staging_bytes(6, 20, true));
}

// Over ranges of the units (expert parallelism: the dense part of each unit
// over dp, the expert part over the expert-data-parallel group): unit 0's
// elements [1, 4) and unit 1's [2, 7) laid back to back, 8 elements in
// buckets of 5: [u0 1..4 + u1 2..4), [u1 4..7); staging 4·min(2·5, 8).
TEST(GradBuckets, AllReducePlanOverUnitRanges) {
  const GradReductionPlan p = all_reduce_plan(std::vector<UnitRange>{{0, 1, 3}, {1, 2, 5}}, 5, true);
  ASSERT_EQ(p.buckets.size(), 2u);
  const GradBucket& b0 = p.buckets[0];
  EXPECT_EQ(b0.count, 5);
  EXPECT_EQ(b0.first_unit, 0u);
  EXPECT_EQ(b0.last_unit, 1u);
  ASSERT_EQ(b0.in.size(), 2u);
  EXPECT_EQ(b0.in[0].unit, 0u);
  EXPECT_EQ(b0.in[0].off, 1);
  EXPECT_EQ(b0.in[0].n, 3);
  EXPECT_EQ(b0.in[0].at, 0);
  EXPECT_EQ(b0.in[1].unit, 1u);
  EXPECT_EQ(b0.in[1].off, 2);
  EXPECT_EQ(b0.in[1].n, 2);
  EXPECT_EQ(b0.in[1].at, 3);
  const GradBucket& b1 = p.buckets[1];
  EXPECT_EQ(b1.count, 3);
  EXPECT_EQ(b1.first_unit, 1u);
  ASSERT_EQ(b1.in.size(), 1u);
  EXPECT_EQ(b1.in[0].off, 4);
  EXPECT_EQ(b1.in[0].n, 3);
  EXPECT_EQ(p.staging_bytes, 4 * 8);
}

}  // namespace
}  // namespace gpuledger
