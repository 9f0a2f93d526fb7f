// Block hashes for prefix caching (models/kv/block_manager.h): block k of a
// token sequence is identified by hash(hash of block k − 1, its B token ids),
// the first block's parent a fixed seed — vLLM's hash_block_tokens
// (vllm-project/vllm at commit 002f349, vllm/v1/core/kv_cache_utils.py:
// hash_block_tokens(hash_function, parent_block_hash, curr_block_token_ids),
// NONE_HASH the root). Chaining makes a block's hash name its whole prefix, so
// equal hashes mean equal leading tokens, not just an equal block.
//
// The hash is 64-bit FNV-1a over the parent hash and the token ids (vLLM uses
// Python's hash or SHA-256 of the pickled tuple); a collision would share a
// wrong block, at odds of about n² / 2^65 for n cached blocks.
#pragma once
#include <cstdint>
#include <vector>

#include "models/kv/block_manager.h"

namespace gpuledger::kv {

inline constexpr BlockHash kRootBlockHash = 0xcbf29ce484222325ull;  // the FNV-1a offset basis

// The hash of one block: its parent's hash, then its token ids.
BlockHash hash_block_tokens(BlockHash parent, const int32_t* tokens, int64_t block_tokens);

// The chained hashes of the full blocks of `tokens` (⌊size / B⌋ of them).
std::vector<BlockHash> block_hashes(const std::vector<int32_t>& tokens, int64_t block_tokens);

}  // namespace gpuledger::kv
