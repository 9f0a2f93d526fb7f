// BlockManager (models/kv/block_manager.h): allocation, freeing and FIFO
// reuse (a sequence's blocks freed tail first), the null block never handed out, growth by appends, admission exact
// at the boundary, prefix sharing by reference count (full blocks only, the
// last token left to compute), sliding-window caps, and the in-use / stored
// counters with their peaks — all against hand-worked block counts.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <stdexcept>

#include "models/kv/block_manager.h"

namespace gpuledger::kv {
namespace {

TEST(BlockManager, AllocateFreeAndReuseInFifoOrder) {
  BlockManager bm(9, 4);  // 8 usable blocks of 4 slots, block 0 the null block
  EXPECT_EQ(bm.free_blocks(), 8);
  ASSERT_TRUE(bm.add_sequence(1, 10));  // ⌈10/4⌉ = 3 blocks
  ASSERT_TRUE(bm.add_sequence(2, 4));   // 1 block
  EXPECT_EQ(bm.block_table(1), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(bm.block_table(2), (std::vector<int32_t>{4}));
  EXPECT_EQ(bm.blocks_in_use(), 4);
  EXPECT_EQ(bm.tokens_stored(), 14);

  bm.free_sequence(1);
  EXPECT_FALSE(bm.contains(1));
  EXPECT_EQ(bm.blocks_in_use(), 1);
  EXPECT_EQ(bm.tokens_stored(), 4);
  EXPECT_EQ(bm.peak_blocks_in_use(), 4);
  EXPECT_EQ(bm.peak_tokens_stored(), 14);

  // Free list after: 5 6 7 8 (never used) then 3 2 1 (freed tail first, as
  // vLLM's free): the head first.
  ASSERT_TRUE(bm.add_sequence(3, 20));  // 5 blocks
  EXPECT_EQ(bm.block_table(3), (std::vector<int32_t>{5, 6, 7, 8, 3}));
  EXPECT_EQ(bm.blocks_in_use(), 6);
  EXPECT_EQ(bm.peak_blocks_in_use(), 6);
  EXPECT_EQ(bm.peak_tokens_stored(), 24);
  EXPECT_THROW(bm.add_sequence(3, 1), std::invalid_argument);  // id taken
  EXPECT_THROW(bm.free_sequence(1), std::out_of_range);        // gone
}

TEST(BlockManager, NullBlockIsNeverHandedOut) {
  BlockManager bm(17, 16);
  std::set<int32_t> seen;
  for (SeqId id = 0; id < 16; ++id) {
    ASSERT_TRUE(bm.add_sequence(id, 1));
    for (int32_t b : bm.block_table(id)) {
      EXPECT_NE(b, BlockManager::kNullBlock);
      EXPECT_TRUE(seen.insert(b).second) << "block " << b << " handed out twice";
    }
  }
  EXPECT_EQ(bm.free_blocks(), 0);
  EXPECT_FALSE(bm.add_sequence(99, 1));
  EXPECT_EQ(bm.ref_count(BlockManager::kNullBlock), 0);
  // A pool of just the null block admits nothing.
  BlockManager empty(1, 16);
  EXPECT_FALSE(empty.can_allocate(1));
  EXPECT_FALSE(empty.add_sequence(0, 1));
}

TEST(BlockManager, AppendsTakeABlockOnlyWhenTheLastIsFull) {
  BlockManager bm(5, 4);
  ASSERT_TRUE(bm.add_sequence(7, 3));
  EXPECT_EQ(bm.block_table(7).size(), 1u);
  ASSERT_TRUE(bm.append(7, 1));  // 4 tokens: the block is now full
  EXPECT_EQ(bm.block_table(7).size(), 1u);
  EXPECT_EQ(bm.tokens_stored(), 4);
  ASSERT_TRUE(bm.append(7, 1));  // 5: a second block
  EXPECT_EQ(bm.block_table(7).size(), 2u);
  ASSERT_TRUE(bm.append(7, 7));  // 12: three blocks
  EXPECT_EQ(bm.block_table(7).size(), 3u);
  EXPECT_EQ(bm.length(7), 12);
  EXPECT_EQ(bm.tokens_stored(), 12);
  EXPECT_EQ(bm.free_blocks(), 1);
}

TEST(BlockManager, AdmissionIsExactAtTheBoundary) {
  BlockManager bm(6, 4);  // 5 free blocks = 20 slots
  EXPECT_TRUE(bm.can_allocate(20));
  EXPECT_FALSE(bm.can_allocate(21));
  EXPECT_FALSE(bm.add_sequence(1, 21));  // refused, and nothing taken
  EXPECT_EQ(bm.free_blocks(), 5);
  EXPECT_FALSE(bm.contains(1));
  ASSERT_TRUE(bm.add_sequence(1, 17));  // 5 blocks, 3 slots spare in the last
  EXPECT_FALSE(bm.can_allocate(1));
  EXPECT_TRUE(bm.append(1, 3));   // fills the last block: no new block needed
  EXPECT_FALSE(bm.append(1, 1));  // needs a sixth block: refused, unchanged
  EXPECT_EQ(bm.length(1), 20);
  EXPECT_EQ(bm.tokens_stored(), 20);
}

TEST(BlockManager, PrefixSharingStoresFullBlocksOnce) {
  BlockManager bm(33, 4);
  ASSERT_TRUE(bm.add_sequence(0, 10));  // the source: blocks of 4, 4, 2 tokens
  const auto src = bm.block_table(0);
  ASSERT_TRUE(bm.add_sequence(1, 14, PrefixRef{0, 10}));
  // Two full blocks shared; the partial third (2 tokens) is not: its tokens are
  // the new sequence's own, in a fresh block.
  EXPECT_EQ(bm.shared_tokens(1), 8);
  const auto t1 = bm.block_table(1);
  ASSERT_EQ(t1.size(), 4u);
  EXPECT_EQ(t1[0], src[0]);
  EXPECT_EQ(t1[1], src[1]);
  EXPECT_NE(t1[2], src[2]);
  EXPECT_EQ(bm.ref_count(src[0]), 2);
  EXPECT_EQ(bm.ref_count(src[1]), 2);
  EXPECT_EQ(bm.ref_count(src[2]), 1);
  EXPECT_EQ(bm.blocks_in_use(), 3 + 2);
  EXPECT_EQ(bm.tokens_stored(), 10 + 6);  // the shared 8 counted once

  // Ten more requests with the same prefix: two more blocks each, not four.
  for (SeqId id = 2; id < 12; ++id) ASSERT_TRUE(bm.add_sequence(id, 14, PrefixRef{0, 10}));
  EXPECT_EQ(bm.ref_count(src[0]), 12);
  EXPECT_EQ(bm.blocks_in_use(), 3 + 11 * 2);
  EXPECT_EQ(bm.tokens_stored(), 10 + 11 * 6);

  // The source leaves: its private partial block goes, the shared ones stay.
  bm.free_sequence(0);
  EXPECT_EQ(bm.ref_count(src[0]), 11);
  EXPECT_EQ(bm.ref_count(src[2]), 0);
  EXPECT_EQ(bm.blocks_in_use(), 2 + 11 * 2);
  EXPECT_EQ(bm.tokens_stored(), 8 + 11 * 6);
  for (SeqId id = 1; id < 12; ++id) bm.free_sequence(id);
  EXPECT_EQ(bm.blocks_in_use(), 0);
  EXPECT_EQ(bm.tokens_stored(), 0);
  EXPECT_EQ(bm.free_blocks(), 32);
}

TEST(BlockManager, PrefixLeavesTheLastTokenToCompute) {
  BlockManager bm(9, 4);
  ASSERT_TRUE(bm.add_sequence(0, 8));
  // The whole 8-token prompt is the prefix: share min(8, 8 − 1) = 7 -> 1 full block.
  ASSERT_TRUE(bm.add_sequence(1, 8, PrefixRef{0, 8}));
  EXPECT_EQ(bm.shared_tokens(1), 4);
  EXPECT_EQ(bm.block_table(1).size(), 2u);
  // A 9-token prompt with the same 8-token prefix shares both blocks.
  ASSERT_TRUE(bm.add_sequence(2, 9, PrefixRef{0, 8}));
  EXPECT_EQ(bm.shared_tokens(2), 8);
  // Admission counts only the blocks that are not shared.
  BlockManager tight(4, 4);                                 // 3 free blocks
  ASSERT_TRUE(tight.add_sequence(0, 8));                    // 2 blocks, 1 left
  EXPECT_FALSE(tight.can_allocate(12));                     // alone it needs 3
  EXPECT_TRUE(tight.add_sequence(1, 12, PrefixRef{0, 8}));  // shares 2, takes 1
  EXPECT_EQ(tight.free_blocks(), 0);
  // Bad prefixes.
  EXPECT_THROW(bm.add_sequence(5, 4, PrefixRef{42, 4}), std::out_of_range);
  EXPECT_THROW(bm.add_sequence(5, 20, PrefixRef{0, 9}), std::invalid_argument);
  BlockManager windowed(9, 4, 8);
  ASSERT_TRUE(windowed.add_sequence(0, 8));
  EXPECT_THROW(windowed.add_sequence(1, 12, PrefixRef{0, 8}), std::invalid_argument);
}

TEST(BlockManager, SlidingWindowCapsTheBlocksOfASequence) {
  BlockManager bm(10, 4, 6);  // window 6: at most ⌈6/4⌉ = 2 blocks per sequence
  EXPECT_EQ(bm.blocks_for(100), 2);
  EXPECT_EQ(bm.blocks_for(5), 2);
  EXPECT_EQ(bm.blocks_for(4), 1);
  ASSERT_TRUE(bm.add_sequence(0, 3));
  for (int i = 0; i < 17; ++i) ASSERT_TRUE(bm.append(0, 1));
  EXPECT_EQ(bm.length(0), 20);
  EXPECT_EQ(bm.block_table(0).size(), 2u);
  EXPECT_EQ(bm.tokens_stored(), 6);
  EXPECT_EQ(bm.peak_tokens_stored(), 6);
  ASSERT_TRUE(bm.add_sequence(1, 1000));
  EXPECT_EQ(bm.block_table(1).size(), 2u);
  EXPECT_EQ(bm.tokens_stored(), 12);
  EXPECT_TRUE(bm.can_allocate(1 << 20));  // any length fits in 2 blocks
}

}  // namespace
}  // namespace gpuledger::kv

namespace gpuledger::kv {
namespace {

// Prefix caching by block hash: blocks of 2 tokens, hashes by hand-made chains.
std::vector<BlockHash> chain(std::initializer_list<BlockHash> h) { return h; }

TEST(BlockManagerPrefixCache, HitsTakeCachedBlocksByReferenceAndCountThemOnce) {
  BlockManager bm(9, 2);                                           // 8 usable blocks
  ASSERT_TRUE(bm.add_sequence(1, 5, PrefixRef(chain({11, 12}))));  // 3 blocks, the first two full: cached
  const auto a = bm.block_table(1);
  EXPECT_TRUE(bm.is_cached(a[0]));
  EXPECT_TRUE(bm.is_cached(a[1]));
  EXPECT_FALSE(bm.is_cached(a[2]));  // partly filled
  // Same first block, different second: one hit block, capped at tokens − 1.
  EXPECT_EQ(bm.cached_prefix_blocks(chain({11, 13}), 4), 1);
  EXPECT_EQ(bm.cached_prefix_blocks(chain({11, 12}), 4), 2);
  EXPECT_EQ(bm.cached_prefix_blocks(chain({11, 12}), 3), 1);  // ⌊3 / 2⌋
  ASSERT_TRUE(bm.add_sequence(2, 5, PrefixRef(chain({11, 12}))));
  const auto b = bm.block_table(2);
  EXPECT_EQ(bm.shared_tokens(2), 4);
  EXPECT_EQ(b[0], a[0]);
  EXPECT_EQ(b[1], a[1]);
  EXPECT_NE(b[2], a[2]);
  EXPECT_EQ(bm.ref_count(a[0]), 2);
  EXPECT_EQ(bm.ref_count(a[1]), 2);
  EXPECT_EQ(bm.blocks_in_use(), 4);      // 3 + 1: the shared two once
  EXPECT_EQ(bm.tokens_stored(), 5 + 1);  // the shared 4 tokens once

  // Both leave: the blocks stay cached on the free queue, their tokens no longer stored.
  bm.free_sequence(1);
  EXPECT_EQ(bm.ref_count(a[0]), 1);
  bm.free_sequence(2);
  EXPECT_EQ(bm.ref_count(a[0]), 0);
  EXPECT_EQ(bm.blocks_in_use(), 0);
  EXPECT_EQ(bm.tokens_stored(), 0);
  EXPECT_TRUE(bm.is_cached(a[0]));
  // A later sequence hits them off the free queue: they leave it, their tokens count again.
  ASSERT_TRUE(bm.add_sequence(3, 6, PrefixRef(chain({11, 12, 14}))));
  EXPECT_EQ(bm.shared_tokens(3), 4);
  EXPECT_EQ(bm.block_table(3)[0], a[0]);
  EXPECT_EQ(bm.ref_count(a[0]), 1);
  EXPECT_EQ(bm.blocks_in_use(), 3);
  EXPECT_EQ(bm.tokens_stored(), 6);
  EXPECT_EQ(bm.free_blocks(), 5);
  EXPECT_EQ(bm.evictions(), 0);
}

TEST(BlockManagerPrefixCache, EvictsTheLeastRecentlyFreedCachedBlockFirstTailBeforeHead) {
  BlockManager bm(7, 2);                                           // 6 usable blocks: 1 … 6
  ASSERT_TRUE(bm.add_sequence(1, 4, PrefixRef(chain({21, 22}))));  // blocks 1, 2, both cached
  ASSERT_TRUE(bm.add_sequence(2, 4, PrefixRef(chain({31, 32}))));  // blocks 3, 4, both cached
  EXPECT_EQ(bm.block_table(1), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(bm.block_table(2), (std::vector<int32_t>{3, 4}));
  bm.free_sequence(1);  // queue: 5 6 | 2 1
  bm.free_sequence(2);  // queue: 5 6 | 2 1 | 4 3
  EXPECT_EQ(bm.free_queue(), (std::vector<int32_t>{5, 6, 2, 1, 4, 3}));
  // Three plain blocks: the never-used two, then block 2 (sequence 1's tail) is evicted.
  ASSERT_TRUE(bm.add_sequence(3, 6));
  EXPECT_EQ(bm.block_table(3), (std::vector<int32_t>{5, 6, 2}));
  EXPECT_EQ(bm.evictions(), 1);
  EXPECT_FALSE(bm.is_cached(2));
  EXPECT_TRUE(bm.is_cached(1));
  // Sequence 1's prefix now hits its first block only; sequence 2's both.
  EXPECT_EQ(bm.cached_prefix_blocks(chain({21, 22}), 100), 1);
  EXPECT_EQ(bm.cached_prefix_blocks(chain({31, 32}), 100), 2);
  // A hit refreshes nothing on the queue order of the others: next evicted is block 1, then 4, then 3.
  ASSERT_TRUE(bm.add_sequence(4, 2));
  EXPECT_EQ(bm.block_table(4), (std::vector<int32_t>{1}));
  EXPECT_EQ(bm.cached_prefix_blocks(chain({21, 22}), 100), 0);
  EXPECT_EQ(bm.evictions(), 2);
  EXPECT_EQ(bm.free_queue(), (std::vector<int32_t>{4, 3}));
  // Admission counts a hit block sitting on the queue as taken off it: 5 tokens
  // are 3 blocks of which 2 hit (blocks 3 and 4 leave the queue) and 1 is new —
  // none is left for it. 4 tokens hit one block (the last token is left to
  // compute) and need one new: block 4, evicted.
  EXPECT_FALSE(bm.can_allocate(5, chain({31, 32})));
  EXPECT_TRUE(bm.can_allocate(4, chain({31, 32})));
  ASSERT_TRUE(bm.add_sequence(5, 4, PrefixRef(chain({31, 32}))));
  EXPECT_EQ(bm.block_table(5), (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(bm.shared_tokens(5), 2);
  EXPECT_EQ(bm.evictions(), 3);
  EXPECT_EQ(bm.free_blocks(), 0);
}

}  // namespace
}  // namespace gpuledger::kv
