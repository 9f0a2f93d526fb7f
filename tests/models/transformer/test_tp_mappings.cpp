// The TP mappings (models/transformer/tp_mappings.h) on a simulated tp group
// of 2 (SimComm books what a real comm would) on the meta device: under sp
// AllTokens gathers t·(tokens/t)·h elements into a workspace and PartialSums
// reduce-scatters from one; without sp neither allocates and PartialSums is
// one all-reduce of tokens·h; on one cpu rank both are the tensor itself.
#include "models/transformer/tp_mappings.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "comm/sim_comm.h"
#include "kernels/ledger.h"
#include "kernels/registry/registry.h"

namespace gpuledger {
namespace {

CommCount count(const CommCounters& c, const char* key) {
  auto it = c.by_key().find(key);
  return it == c.by_key().end() ? CommCount{} : it->second;
}

TEST(TpMappings, SequenceParallelGatherAndReduceScatter) {
  Ledger ledger;
  auto dev = make_device("meta", ledger);
  CommCounters counters;
  auto tp = make_sim_comm("tp", counters, 2, 1);
  const TpRegion r{*dev, *tp, /*sp=*/true, /*tokens=*/8, /*hidden=*/4, DType::kFP32};
  const int64_t full_bytes = 4 * 8 * 4;
  {
    AllTokens all(r, nullptr, "gathered");
    EXPECT_EQ(ledger.live(Account::kWorkspace), full_bytes);
    all.reset();
    EXPECT_EQ(ledger.live(Account::kWorkspace), 0);
  }
  EXPECT_EQ(count(counters, "all_gather@tp").calls, 1);
  EXPECT_EQ(count(counters, "all_gather@tp").bytes, full_bytes);  // (tokens/t)·h per rank, t ranks
  PartialSums sums(r, nullptr, "partial");
  EXPECT_EQ(ledger.live(Account::kWorkspace), full_bytes);
  sums.reduce();
  EXPECT_EQ(ledger.live(Account::kWorkspace), 0);
  EXPECT_EQ(count(counters, "reduce_scatter@tp").calls, 1);
  EXPECT_EQ(count(counters, "reduce_scatter@tp").bytes, full_bytes);
  EXPECT_EQ(count(counters, "all_reduce@tp").calls, 0);
}

TEST(TpMappings, WithoutSequenceParallelismOneAllReduceInPlace) {
  Ledger ledger;
  auto dev = make_device("meta", ledger);
  CommCounters counters;
  auto tp = make_sim_comm("tp", counters, 2, 0);
  const TpRegion r{*dev, *tp, /*sp=*/false, 8, 4, DType::kBF16};
  AllTokens all(r, nullptr, "gathered");
  PartialSums sums(r, nullptr, "partial");
  EXPECT_EQ(ledger.peak(Account::kWorkspace), 0);
  sums.reduce();
  EXPECT_EQ(count(counters, "all_reduce@tp").calls, 1);
  EXPECT_EQ(count(counters, "all_reduce@tp").bytes, 2 * 8 * 4);
  EXPECT_EQ(count(counters, "all_gather@tp").calls, 0);
}

TEST(TpMappings, OneCpuRankWorksOnTheTensorItself) {
  Ledger ledger;
  auto dev = make_device("cpu", ledger);
  CommCounters counters;
  auto tp = make_self_comm("tp", counters, *dev);
  const TpRegion r{*dev, *tp, false, 2, 3, DType::kFP32};
  Buffer x = dev->alloc(4 * 6, Account::kWorkspace, "x");
  const std::vector<float> v = {1, 2, 3, 4, 5, 6};
  dev->copy_from_host(x.data(), v.data(), 4 * 6);
  AllTokens all(r, x.data(), "gathered");
  EXPECT_EQ(all.data(), x.data());
  PartialSums sums(r, x.data(), "partial");
  EXPECT_EQ(sums.data(), x.data());
  sums.reduce();
  std::vector<float> got(6);
  dev->copy_to_host(got.data(), x.data(), 4 * 6);
  EXPECT_EQ(got, v);
}

}  // namespace
}  // namespace gpuledger
