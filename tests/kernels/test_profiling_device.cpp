// ProfilingDevice: wrapping a device changes neither the bytes booked nor the
// FLOPs counted, and attributes calls, time and FLOPs to each op.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/profiling_device.h"

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
  g.m = m; g.n = n; g.k = k;
  g.a = a.data(); g.lda = k; g.b = b.data(); g.ldb = k; g.c = c.data(); g.ldc = n;
  dev.gemm(g);
  dev.gemm(g);
  dev.copy_to_host(out.data(), c.data(), m * n * 4);
  EXPECT_EQ(out[0], 2.0f * k);                          // computed by the wrapped device
  EXPECT_EQ(dev.executed_flops(), 2 * (2 * m * n * k));  // counted once per call, as the backends do
  EXPECT_EQ(ledger.live(Account::kActivations), m * k * 4);
  EXPECT_EQ(ledger.live(Account::kWeights), n * k * 4);
  const auto& t = dev.op_times().at("gemm");
  EXPECT_EQ(t.calls, 2);
  EXPECT_EQ(t.flops, 2 * (2 * m * n * k));
  EXPECT_GE(t.seconds, 0.0);
  a.reset();
  EXPECT_EQ(ledger.live(Account::kActivations), 0);
}

}  // namespace
}  // namespace gpuledger
