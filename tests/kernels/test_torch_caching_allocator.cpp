// The model of PyTorch's caching allocator (kernels/torch_caching_allocator.h)
// on hand-made sequences; every reserved and allocated figure is worked in the
// comments from the rules (512-byte rounding, 2 MiB small segments, 20 MiB
// large segments below 10 MiB, 2 MiB rounding above, split rules, best fit,
// merging, no release). Also the ledger's event recording it replays.
#include <gtest/gtest.h>

#include "kernels/ledger.h"
#include "kernels/torch_caching_allocator.h"

namespace gpuledger {
namespace {

constexpr int64_t KiB = 1024, MiB = 1024 * 1024;

TEST(TorchCachingAllocator, Rounding) {
  using M = TorchCachingAllocatorModel;
  EXPECT_EQ(M::round_size(1), 512);
  EXPECT_EQ(M::round_size(512), 512);
  EXPECT_EQ(M::round_size(513), 1024);
  EXPECT_EQ(M::segment_size(1 * MiB), 2 * MiB);         // small pool
  EXPECT_EQ(M::segment_size(1 * MiB + 512), 20 * MiB);  // large, < 10 MiB
  EXPECT_EQ(M::segment_size(10 * MiB - 512), 20 * MiB);
  EXPECT_EQ(M::segment_size(10 * MiB), 10 * MiB);  // >= 10 MiB: rounded to 2 MiB
  EXPECT_EQ(M::segment_size(11 * MiB), 12 * MiB);
}

TEST(TorchCachingAllocator, SmallPoolPacksTwoMiBSegments) {
  TorchCachingAllocatorModel m;
  // 1 B → 512; 513 B → 1024: one 2 MiB segment, split twice.
  const auto a = m.malloc(1);
  const auto b = m.malloc(513);
  EXPECT_EQ(m.allocated_bytes(), 1536);
  EXPECT_EQ(m.requested_bytes(), 514);
  EXPECT_EQ(m.reserved_bytes(), 2 * MiB);
  m.free(a);
  m.free(b);
  EXPECT_EQ(m.allocated_bytes(), 0);
  EXPECT_EQ(m.reserved_bytes(), 2 * MiB);  // cached, not released
  // Four 512 KiB blocks fill the (merged) 2 MiB segment exactly: the last
  // takes the 512 KiB rest whole (nothing left to split). A fifth needs a new segment.
  for (int i = 0; i < 4; ++i) m.malloc(512 * KiB);
  EXPECT_EQ(m.reserved_bytes(), 2 * MiB);
  EXPECT_EQ(m.segments(), 1);
  m.malloc(512 * KiB);
  EXPECT_EQ(m.reserved_bytes(), 4 * MiB);
  EXPECT_EQ(m.allocated_bytes(), 5 * 512 * KiB);
  EXPECT_EQ(m.segments(), 2);
}

TEST(TorchCachingAllocator, LargePoolSplitAndNewSegments) {
  TorchCachingAllocatorModel m;
  // 1 MiB + 1 B → 1 MiB + 512 (large): a 20 MiB segment, the rest (19 MiB − 512) > 1 MiB: split.
  m.malloc(1 * MiB + 1);
  EXPECT_EQ(m.reserved_bytes(), 20 * MiB);
  EXPECT_EQ(m.allocated_bytes(), 1 * MiB + 512);
  // 10 MiB fits in the cached 19 MiB − 512 rest (best fit), split again (9 MiB − 512 > 1 MiB).
  m.malloc(10 * MiB);
  EXPECT_EQ(m.reserved_bytes(), 20 * MiB);
  // 12 MiB does not fit in the 9 MiB − 512 rest: a new segment of 12 MiB.
  m.malloc(12 * MiB);
  EXPECT_EQ(m.reserved_bytes(), 32 * MiB);
  EXPECT_EQ(m.allocated_bytes(), 1 * MiB + 512 + 10 * MiB + 12 * MiB);
  EXPECT_EQ(m.segments(), 2);
}

TEST(TorchCachingAllocator, NoSplitWhenTheRestIsAtMostOneMiB) {
  TorchCachingAllocatorModel m;
  // 11 MiB → a 12 MiB segment; the rest is exactly 1 MiB, not > 1 MiB: the
  // whole 12 MiB block is handed out and counted allocated.
  const auto a = m.malloc(11 * MiB);
  EXPECT_EQ(m.reserved_bytes(), 12 * MiB);
  EXPECT_EQ(m.allocated_bytes(), 12 * MiB);
  EXPECT_EQ(m.requested_bytes(), 11 * MiB);
  m.free(a);
  // 10.5 MiB reuses the cached 12 MiB block: rest 1.5 MiB > 1 MiB, split.
  const auto b = m.malloc(10 * MiB + 512 * KiB);
  EXPECT_EQ(m.reserved_bytes(), 12 * MiB);
  EXPECT_EQ(m.allocated_bytes(), 10 * MiB + 512 * KiB);
  // The 1.5 MiB rest serves a 1.25 MiB request (rest 256 KiB: not split).
  m.malloc(1 * MiB + 256 * KiB);
  EXPECT_EQ(m.reserved_bytes(), 12 * MiB);
  EXPECT_EQ(m.allocated_bytes(), 12 * MiB);
  m.free(b);
  EXPECT_EQ(m.allocated_bytes(), 1 * MiB + 512 * KiB);
}

TEST(TorchCachingAllocator, BestFitAndMerging) {
  TorchCachingAllocatorModel m;
  // Two segments: 12 MiB and 16 MiB, both freed and cached.
  const auto a = m.malloc(12 * MiB);
  const auto b = m.malloc(16 * MiB);
  m.free(b);
  m.free(a);
  EXPECT_EQ(m.reserved_bytes(), 28 * MiB);
  // 11.5 MiB: best fit is the 12 MiB block (rest 0.5 MiB, not split), not the 16.
  m.malloc(11 * MiB + 512 * KiB);
  EXPECT_EQ(m.allocated_bytes(), 12 * MiB);
  // 14 MiB then takes the 16 MiB block (rest 2 MiB > 1 MiB: split): no new segment.
  const auto c = m.malloc(14 * MiB);
  EXPECT_EQ(m.reserved_bytes(), 28 * MiB);
  EXPECT_EQ(m.allocated_bytes(), 26 * MiB);
  // Freeing c merges it with its 2 MiB rest: a 15 MiB request fits the 16 MiB block again.
  m.free(c);
  m.malloc(15 * MiB);
  EXPECT_EQ(m.reserved_bytes(), 28 * MiB);
  EXPECT_EQ(m.segments(), 2);
  // Without merging the two halves of one segment, a request as large as the
  // segment needs a new one: 20 MiB segment split 4 + 4 (+ 12 rest), all freed,
  // merges back to 20 MiB, and an 18 MiB request reuses it.
  TorchCachingAllocatorModel n;
  const auto x = n.malloc(4 * MiB);
  const auto y = n.malloc(4 * MiB);
  EXPECT_EQ(n.reserved_bytes(), 20 * MiB);
  n.free(x);
  n.free(y);
  n.malloc(18 * MiB);
  EXPECT_EQ(n.reserved_bytes(), 20 * MiB);
  EXPECT_EQ(n.peak_allocated_bytes(), 18 * MiB);
}

TEST(TorchCachingAllocator, LedgerEventsReplay) {
  Ledger ledger;
  ledger.book(Account::kWeights, 100);  // not recorded: events off
  ledger.unbook(Account::kWeights, 100);
  ledger.enable_events(true);
  ledger.book(Account::kWeights, 3 * MiB);
  ledger.book(Account::kWorkspace, 1000);
  ledger.book(Account::kWorkspace, 1000);
  ledger.unbook(Account::kWorkspace, 1000);
  ASSERT_EQ(ledger.events().size(), 4u);
  EXPECT_EQ(ledger.events()[0].account, Account::kWeights);
  EXPECT_EQ(ledger.events()[0].bytes, 3 * MiB);
  EXPECT_TRUE(ledger.events()[0].alloc);
  EXPECT_FALSE(ledger.events()[3].alloc);
  // The cuBLAS workspace first (8,519,680 B: large pool, < 10 MiB → one 20 MiB
  // segment, split); 3 MiB from its rest (20 MiB − 8,519,680 = 12,451,840 > 3 MiB,
  // rest 9,306,112 > 1 MiB: split); two 1000-byte requests (1024 each) from a
  // 2 MiB small segment. Reserved 22 MiB; allocated peak 8,519,680 + 3 MiB + 2048.
  const auto r = replay_torch_caching_allocator(ledger.events(), 8'519'680);
  EXPECT_EQ(r.events, 4);
  EXPECT_EQ(r.peak_reserved_bytes, 22 * MiB);
  EXPECT_EQ(r.peak_allocated_bytes, 8'519'680 + 3 * MiB + 2048);
  EXPECT_EQ(r.peak_requested_bytes, 8'519'680 + 3 * MiB + 2000);
  EXPECT_EQ(r.segments, 2);
  // A free that was never allocated is a bug in the list.
  EXPECT_THROW(replay_torch_caching_allocator({{Account::kKv, 10, false}}, 0), std::logic_error);
}

}  // namespace
}  // namespace gpuledger
