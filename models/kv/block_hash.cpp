// Chained block hashes (see block_hash.h).
#include "models/kv/block_hash.h"

#include <stdexcept>
#include <string>

namespace gpuledger::kv {

namespace {
constexpr uint64_t kFnvPrime = 0x100000001b3ull;
uint64_t fnv_bytes(uint64_t h, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) {
    h ^= (value >> (8 * i)) & 0xffu;
    h *= kFnvPrime;
  }
  return h;
}
}  // namespace

BlockHash hash_block_tokens(BlockHash parent, const int32_t* tokens, int64_t block_tokens) {
  uint64_t h = fnv_bytes(kRootBlockHash, parent, 8);
  for (int64_t t = 0; t < block_tokens; ++t) h = fnv_bytes(h, static_cast<uint32_t>(tokens[t]), 4);
  return h;
}

std::vector<BlockHash> block_hashes(const std::vector<int32_t>& tokens, int64_t block_tokens) {
  if (block_tokens < 1)
    throw std::invalid_argument("a KV block must hold >= 1 token, got " + std::to_string(block_tokens));
  const auto n = static_cast<int64_t>(tokens.size()) / block_tokens;
  std::vector<BlockHash> out;
  out.reserve(static_cast<size_t>(n));
  BlockHash parent = kRootBlockHash;
  for (int64_t k = 0; k < n; ++k) {
    parent = hash_block_tokens(parent, tokens.data() + k * block_tokens, block_tokens);
    out.push_back(parent);
  }
  return out;
}

}  // namespace gpuledger::kv
