// ProfilingDevice: wrapping a device changes neither the bytes booked nor the
// FLOPs counted, and attributes calls, time and FLOPs to each op, timing each
// with the wrapped device's timer (Device::start_timer). The default timer
// (the host clock between synchronize() calls) is checked against a sleep.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "kernels/cpu/cpu_device.h"
#include "kernels/profiling_device.h"
#include "kernels/registry/registry.h"

namespace gpuledger {
namespace {

TEST(ProfilingDevice, SameLedgerAndFlopsAsTheWrappedDevice) {
  Ledger ledger;
  ProfilingDevice dev(make_device("cpu", ledger));
  const int64_t m = 32, n = 16, k = 8;
  Buffer a = dev.alloc(m * k * 4, Account::kActivations, "a");
  Buffer b = dev.alloc(n * k * 4, Account::kWeights, "b");
  Buffer c = dev.alloc(m * n * 4, Account::kWorkspace, "c");
  std::vector<float> ones(m * k, 1.0f), twos(n * k, 2.0f), out(m * n, 0.0f);
  dev.copy_from_host(a.data(), ones.data(), m * k * 4);
  dev.copy_from_host(b.data(), twos.data(), n * k * 4);
  GemmArgs g;
  g.trans_b = true;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = a.data();
  g.lda = k;
  g.b = b.data();
  g.ldb = k;
  g.c = c.data();
  g.ldc = n;
  dev.gemm(g);
  dev.gemm(g);
  dev.copy_to_host(out.data(), c.data(), m * n * 4);
  EXPECT_EQ(out[0], 2.0f * k);                           // computed by the wrapped device
  EXPECT_EQ(dev.executed_flops(), 2 * (2 * m * n * k));  // counted once per call, as the backends do
  EXPECT_EQ(ledger.live(Account::kActivations), m * k * 4);
  EXPECT_EQ(ledger.live(Account::kWeights), n * k * 4);
  const auto& t = dev.op_times().at("gemm");
  EXPECT_EQ(t.calls, 2);
  EXPECT_EQ(t.flops, 2 * (2 * m * n * k));
  EXPECT_GT(t.seconds, 0.0);  // the default timer: steady_clock, nanoseconds
  a.reset();
  EXPECT_EQ(ledger.live(Account::kActivations), 0);
}

// A CPU device that counts synchronize() calls.
class SyncCountingDevice : public CpuDevice {
 public:
  using CpuDevice::CpuDevice;
  void synchronize() override { ++syncs; }
  int syncs = 0;
};

TEST(DeviceTimer, DefaultSynchronizesAtStartAndStopAndMeasuresHostTime) {
  Ledger ledger;
  SyncCountingDevice dev(ledger);
  auto timer = dev.start_timer();
  EXPECT_EQ(dev.syncs, 1);  // earlier work is not timed
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const double s = timer->stop_seconds();
  EXPECT_EQ(dev.syncs, 2);  // waits for the timed work
  EXPECT_GE(s, 0.020);      // sleep_for sleeps at least as long as asked
  EXPECT_LT(s, 5.0);
}

// A CPU device whose timer reports a fixed 0.125 s (a power of two: sums are exact).
class FixedTimerDevice : public CpuDevice {
 public:
  using CpuDevice::CpuDevice;
  struct Fixed : DeviceTimer {
    double stop_seconds() override { return 0.125; }
  };
  std::unique_ptr<DeviceTimer> start_timer() override {
    ++timers;
    return std::make_unique<Fixed>();
  }
  int timers = 0;
};

TEST(ProfilingDevice, TimesEachOpWithTheWrappedDevicesTimer) {
  Ledger ledger;
  auto inner = std::make_unique<FixedTimerDevice>(ledger);
  FixedTimerDevice* fixed = inner.get();
  ProfilingDevice dev(std::move(inner));
  const int64_t N = 2, Vl = 4;
  std::vector<float> probs = {1, 2, 3, 4, 5, 6, 7, 8}, sums = {2, 4};
  const std::vector<int32_t> targets = {1, 9};  // row 1's target is on another rank
  dev.vocab_ce_normalize(probs.data(), sums.data(), N, Vl);
  EXPECT_EQ(probs, (std::vector<float>{0.5f, 1, 1.5f, 2, 1.25f, 1.5f, 1.75f, 2}));
  dev.vocab_ce_backward(probs.data(), probs.data(), targets.data(), N, Vl, 0, 2.0f);
  EXPECT_EQ(probs, (std::vector<float>{1, 0, 3, 4, 2.5f, 3, 3.5f, 4}));
  dev.vocab_ce_backward(probs.data(), probs.data(), targets.data(), N, Vl, 0, 1.0f);
  EXPECT_EQ(fixed->timers, 3);
  EXPECT_EQ(dev.op_times().at("vocab_ce_normalize").calls, 1);
  EXPECT_EQ(dev.op_times().at("vocab_ce_normalize").seconds, 0.125);
  EXPECT_EQ(dev.op_times().at("vocab_ce_backward").calls, 2);
  EXPECT_EQ(dev.op_times().at("vocab_ce_backward").seconds, 0.25);
  EXPECT_EQ(dev.op_times().at("vocab_ce_backward").flops, 0);
  auto t = dev.start_timer();  // forwarded to the wrapped device
  EXPECT_EQ(fixed->timers, 4);
  EXPECT_EQ(t->stop_seconds(), 0.125);
}

}  // namespace
}  // namespace gpuledger
