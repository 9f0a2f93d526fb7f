// Ledger: live / peak / count per account, the breakdown at the total's peak
// (which is not the per-account peaks), the limit (OutOfMemory books nothing),
// reset_peaks, the phase timeline; and the Buffer handle that frees through
// it exactly once (RAII, moves, reset). Every expected figure is worked out by
// hand from the sequence each test books.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "kernels/device.h"
#include "kernels/ledger.h"
#include "kernels/meta/meta_device.h"

namespace gpuledger {
namespace {

using A = Account;

TEST(Ledger, LivePeakCountPerAccount) {
  Ledger l;
  l.book(A::kWeights, 100, "w");
  l.book(A::kGrads, 50, "g");
  l.book(A::kGrads, 30, "g2");
  l.unbook(A::kGrads, 50);
  l.book(A::kActivations, 7, "act");

  EXPECT_EQ(l.live(A::kWeights), 100);
  EXPECT_EQ(l.live(A::kGrads), 30);
  EXPECT_EQ(l.live(A::kActivations), 7);
  EXPECT_EQ(l.live(A::kOptim), 0);
  EXPECT_EQ(l.peak(A::kGrads), 80);  // 50 + 30 before the unbook
  EXPECT_EQ(l.count(A::kGrads), 2);  // allocations made, not live
  EXPECT_EQ(l.count(A::kWeights), 1);
  EXPECT_EQ(l.count(A::kMaster), 0);
  EXPECT_EQ(l.live_total(), 137);
  EXPECT_EQ(l.peak_total(), 180);  // 100 + 50 + 30
  EXPECT_EQ(l.live_by_account().device_total(), 137);
}

TEST(Ledger, AtPeakIsTheBreakdownAtTheTotalsPeakNotThePerAccountPeaks) {
  Ledger l;
  l.book(A::kWeights, 100);      // total 100
  l.book(A::kActivations, 50);   // total 150: peak, {w 100, act 50}
  l.unbook(A::kWeights, 100);    // total 50
  l.book(A::kWorkspace, 120);    // total 170: new peak, {w 0, act 50, ws 120}
  l.unbook(A::kWorkspace, 120);  // total 50
  l.book(A::kWeights, 110);      // total 160 < 170: no new peak

  EXPECT_EQ(l.peak_total(), 170);
  EXPECT_EQ(l.at_peak()[A::kWeights], 0);
  EXPECT_EQ(l.at_peak()[A::kActivations], 50);
  EXPECT_EQ(l.at_peak()[A::kWorkspace], 120);
  EXPECT_EQ(l.at_peak().device_total(), 170);
  // The per-account peaks: 110, 50, 120 — their sum is not a moment that existed.
  EXPECT_EQ(l.peak(A::kWeights), 110);
  EXPECT_EQ(l.peak(A::kActivations), 50);
  EXPECT_EQ(l.peak(A::kWorkspace), 120);
  EXPECT_EQ(l.peak_by_account().device_total(), 280);
  EXPECT_NE(l.peak_by_account().device_total(), l.at_peak().device_total());
}

TEST(Ledger, AtPeakKeepsTheFirstMomentAPeakIsReached) {
  Ledger l;
  l.book(A::kWeights, 100);  // peak 100 {w 100}
  l.unbook(A::kWeights, 100);
  l.book(A::kGrads, 100);  // equal total, not a new peak
  EXPECT_EQ(l.peak_total(), 100);
  EXPECT_EQ(l.at_peak()[A::kWeights], 100);
  EXPECT_EQ(l.at_peak()[A::kGrads], 0);
}

TEST(Ledger, LimitThrowsOutOfMemoryAndBooksNothing) {
  Ledger l(1000);
  l.book(A::kWeights, 600, "w");
  try {
    l.book(A::kActivations, 401, "layer0.qkv");
    FAIL() << "expected OutOfMemory";
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(std::string(e.what()),
              "allocating 401 bytes for layer0.qkv (activations) would exceed the memory limit "
              "1000: live 600");
    EXPECT_EQ(e.account, A::kActivations);
    EXPECT_EQ(e.requested_bytes, 401);
    EXPECT_EQ(e.live_bytes, 600);
    ASSERT_TRUE(e.limit_bytes.has_value());
    EXPECT_EQ(*e.limit_bytes, 1000);
  }
  // Nothing changed.
  EXPECT_EQ(l.live_total(), 600);
  EXPECT_EQ(l.peak_total(), 600);
  EXPECT_EQ(l.live(A::kActivations), 0);
  EXPECT_EQ(l.peak(A::kActivations), 0);
  EXPECT_EQ(l.count(A::kActivations), 0);
  EXPECT_EQ(l.at_peak()[A::kActivations], 0);
  // Exactly up to the limit is allowed.
  l.book(A::kActivations, 400, "fits");
  EXPECT_EQ(l.live_total(), 1000);
  EXPECT_EQ(l.limit(), 1000);
}

TEST(Ledger, UnlimitedByDefault) {
  Ledger l;
  EXPECT_FALSE(l.limit().has_value());
  l.book(A::kKv, int64_t{1} << 50);  // 1 PiB: bookkeeping only
  EXPECT_EQ(l.live(A::kKv), int64_t{1} << 50);
}

TEST(Ledger, MisuseIsAnError) {
  Ledger l;
  EXPECT_THROW(l.book(A::kWeights, -1), std::invalid_argument);
  l.book(A::kWeights, 10);
  EXPECT_THROW(l.unbook(A::kWeights, 11), std::logic_error);  // more than is live
  EXPECT_THROW(l.unbook(A::kGrads, 1), std::logic_error);     // wrong account
  EXPECT_EQ(l.live(A::kWeights), 10);
}

TEST(Ledger, ResetPeaksRestartsFromLive) {
  Ledger l;
  l.book(A::kWeights, 100);
  l.book(A::kWorkspace, 500);
  l.unbook(A::kWorkspace, 500);
  EXPECT_EQ(l.peak_total(), 600);
  l.reset_peaks();
  EXPECT_EQ(l.peak_total(), 100);
  EXPECT_EQ(l.peak(A::kWorkspace), 0);
  EXPECT_EQ(l.peak(A::kWeights), 100);
  EXPECT_EQ(l.at_peak()[A::kWeights], 100);
  EXPECT_EQ(l.at_peak()[A::kWorkspace], 0);
  EXPECT_EQ(l.count(A::kWorkspace), 1);  // counts are not peaks
  l.book(A::kActivations, 20);
  EXPECT_EQ(l.peak_total(), 120);
  EXPECT_EQ(l.at_peak()[A::kActivations], 20);
}

TEST(Ledger, TimelineRecordsLiveAndPeakBetweenMarkers) {
  Ledger l;
  l.mark_phase("ignored");  // off by default: not recorded
  EXPECT_TRUE(l.timeline().empty());

  l.enable_timeline(true);
  l.book(A::kWeights, 100);
  l.mark_phase("start");  // live 100, peak since previous marker 100
  l.book(A::kActivations, 40);
  l.book(A::kWorkspace, 60);      // 200
  l.unbook(A::kWorkspace, 60);    // 140
  l.mark_phase("fwd.layer.0");    // live {w 100, act 40}, peak since "start" 200
  l.unbook(A::kActivations, 40);  // 100
  l.mark_phase("bwd.layer.0");    // peak since "fwd.layer.0": 140 (the live total at it)

  const auto& tl = l.timeline();
  ASSERT_EQ(tl.size(), 3u);
  EXPECT_EQ(tl[0].phase, "start");
  EXPECT_EQ(tl[0].live[A::kWeights], 100);
  EXPECT_EQ(tl[0].peak_since_prev, 100);
  EXPECT_EQ(tl[1].phase, "fwd.layer.0");
  EXPECT_EQ(tl[1].live[A::kWeights], 100);
  EXPECT_EQ(tl[1].live[A::kActivations], 40);
  EXPECT_EQ(tl[1].live[A::kWorkspace], 0);
  EXPECT_EQ(tl[1].peak_since_prev, 200);
  EXPECT_EQ(tl[2].phase, "bwd.layer.0");
  EXPECT_EQ(tl[2].live.device_total(), 100);
  EXPECT_EQ(tl[2].peak_since_prev, 140);

  l.enable_timeline(false);
  l.mark_phase("off");
  EXPECT_EQ(l.timeline().size(), 3u);
}

// A device with real pointers that counts raw_alloc / raw_free, so the tests
// can see that every Buffer frees exactly once. (MetaDevice supplies the op
// table; touches_memory() is turned back on.)
class CountingDevice : public MetaDevice {
 public:
  using MetaDevice::MetaDevice;
  bool touches_memory() const override { return true; }
  int allocs = 0, frees = 0;
  int64_t freed_bytes = 0;
  bool fail_next = false;

 protected:
  void* raw_alloc(int64_t bytes) override {
    if (fail_next) return nullptr;
    ++allocs;
    return new char[bytes > 0 ? bytes : 1];
  }
  void raw_free(void* p, int64_t bytes) override {
    ++frees;
    freed_bytes += bytes;
    delete[] static_cast<char*>(p);
  }
  void* raw_alloc_host(int64_t bytes) override {
    ++host_allocs;
    return new char[bytes > 0 ? bytes : 1];
  }
  void raw_free_host(void* p, int64_t bytes) override {
    ++host_frees;
    delete[] static_cast<char*>(p);
  }

 public:
  int host_allocs = 0, host_frees = 0;
};

// Host memory (account host) is booked per account on the rank's ledger but
// is not device memory: the device total, its peak, the breakdown at the
// peak's moment and the memory limit leave it out.
TEST(Ledger, HostAccountIsOutsideTheDeviceTotalAndLimit) {
  Ledger l(100);
  l.enable_events(true);
  l.book(A::kWeights, 60);
  l.book(A::kHost, 500, "swap");  // past the device limit: host memory is not the device's
  EXPECT_EQ(l.live(A::kHost), 500);
  EXPECT_EQ(l.live_total(), 60);
  EXPECT_EQ(l.peak_total(), 60);
  EXPECT_EQ(l.at_peak()[A::kHost], 0);  // the device peak was reached before the host booking
  EXPECT_EQ(l.at_peak().device_total(), 60);
  EXPECT_EQ(l.live_by_account().host(), 500);
  EXPECT_EQ(l.live_by_account().device_total(), 60);
  l.book(A::kActivations, 40);  // 60 + 40 = the limit exactly
  EXPECT_EQ(l.peak_total(), 100);
  EXPECT_EQ(l.at_peak()[A::kHost], 500);
  EXPECT_EQ(l.at_peak().device_total(), 100);
  EXPECT_THROW(l.book(A::kComm, 1), OutOfMemory);
  l.unbook(A::kHost, 500);
  l.book(A::kHost, 200);
  EXPECT_EQ(l.peak(A::kHost), 500);
  EXPECT_EQ(l.live(A::kHost), 200);
  EXPECT_EQ(l.count(A::kHost), 2);
  EXPECT_EQ(l.live_total(), 100);
  EXPECT_EQ(l.events().size(), 2u);  // the device allocator's events only
}

TEST(Buffer, HostAccountAllocatesHostMemoryAndFreesIt) {
  Ledger l;
  CountingDevice d(l);
  {
    Buffer h = d.alloc(96, A::kHost, "offload");
    EXPECT_NE(h.data(), nullptr);
    EXPECT_EQ(d.host_allocs, 1);
    EXPECT_EQ(d.allocs, 0);
    EXPECT_EQ(l.live(A::kHost), 96);
    EXPECT_EQ(l.live_total(), 0);
  }
  EXPECT_EQ(d.host_frees, 1);
  EXPECT_EQ(d.frees, 0);
  EXPECT_EQ(l.live(A::kHost), 0);
  EXPECT_EQ(l.peak(A::kHost), 96);
}

TEST(Buffer, FreesExactlyOnceAtScopeEnd) {
  Ledger l;
  CountingDevice d(l);
  {
    Buffer b = d.alloc(64, A::kActivations, "x");
    EXPECT_FALSE(b.empty());
    EXPECT_NE(b.data(), nullptr);
    EXPECT_EQ(b.bytes(), 64);
    EXPECT_EQ(b.account(), A::kActivations);
    EXPECT_EQ(l.live(A::kActivations), 64);
  }
  EXPECT_EQ(d.allocs, 1);
  EXPECT_EQ(d.frees, 1);
  EXPECT_EQ(d.freed_bytes, 64);
  EXPECT_EQ(l.live_total(), 0);
  EXPECT_EQ(l.peak(A::kActivations), 64);
}

TEST(Buffer, MovesTransferOwnership) {
  Ledger l;
  CountingDevice d(l);
  Buffer a = d.alloc(10, A::kWeights);
  void* p = a.data();
  Buffer b(std::move(a));  // move-construct
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(a.bytes(), 0);
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(d.frees, 0);

  Buffer c = d.alloc(20, A::kGrads);
  c = std::move(b);  // move-assign: c's 20 bytes are freed now, b's 10 move in
  EXPECT_EQ(d.frees, 1);
  EXPECT_EQ(d.freed_bytes, 20);
  EXPECT_EQ(l.live(A::kGrads), 0);
  EXPECT_EQ(l.live(A::kWeights), 10);
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(c.account(), A::kWeights);

  Buffer& self = c;
  c = std::move(self);  // self-move keeps the buffer
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(d.frees, 1);

  c.reset();
  EXPECT_TRUE(c.empty());
  c.reset();  // a second reset frees nothing
  EXPECT_EQ(d.frees, 2);
  EXPECT_EQ(l.live_total(), 0);
  EXPECT_EQ(d.allocs, 2);
}

TEST(Buffer, LedgerLimitRefusesBeforeTheDeviceIsAsked) {
  Ledger l(100);
  CountingDevice d(l);
  Buffer a = d.alloc(60, A::kWeights);
  EXPECT_THROW(d.alloc(41, A::kActivations, "too big"), OutOfMemory);
  EXPECT_EQ(d.allocs, 1);  // raw_alloc never called for the refused request
  EXPECT_EQ(l.live_total(), 60);
  EXPECT_EQ(l.count(A::kActivations), 0);
}

TEST(Buffer, DeviceAllocationFailureUnbooksAndThrows) {
  Ledger l;
  CountingDevice d(l);
  d.fail_next = true;
  try {
    d.alloc(1234, A::kOptim, "adam.m");
    FAIL() << "expected OutOfMemory";
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(e.account, A::kOptim);
    EXPECT_EQ(e.requested_bytes, 1234);
    EXPECT_NE(std::string(e.what()).find("adam.m"), std::string::npos);
  }
  EXPECT_EQ(l.live_total(), 0);
  EXPECT_EQ(l.live(A::kOptim), 0);
}

TEST(Buffer, ZeroBytesIsAValidAllocation) {
  Ledger l;
  CountingDevice d(l);
  {
    Buffer b = d.alloc(0, A::kComm);
    EXPECT_FALSE(b.empty());
    EXPECT_EQ(l.count(A::kComm), 1);
  }
  EXPECT_EQ(d.frees, 1);
}

}  // namespace
}  // namespace gpuledger

// The ledger keeps its state at the first refused allocation, so a failed
// point's report can show it after the unwinding has freed everything.
TEST(LedgerFailure, KeepsTheLiveBytesAtTheFirstRefusal) {
  gpuledger::Ledger l(1000);
  l.book(gpuledger::Account::kWeights, 600, "w");
  l.book(gpuledger::Account::kActivations, 300, "a");
  EXPECT_FALSE(l.failure().has_value());
  EXPECT_THROW(l.book(gpuledger::Account::kWorkspace, 200, "tmp"), gpuledger::OutOfMemory);
  l.unbook(gpuledger::Account::kActivations, 300);
  EXPECT_THROW(l.book(gpuledger::Account::kKv, 500, "second"), gpuledger::OutOfMemory);
  ASSERT_TRUE(l.failure().has_value());
  const auto& f = *l.failure();
  EXPECT_EQ(f.live[gpuledger::Account::kWeights], 600);
  EXPECT_EQ(f.live[gpuledger::Account::kActivations], 300);
  EXPECT_EQ(f.account, gpuledger::Account::kWorkspace);
  EXPECT_EQ(f.requested_bytes, 200);
  EXPECT_EQ(f.what, "tmp");
}
