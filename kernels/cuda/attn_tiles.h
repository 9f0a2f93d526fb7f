// Index arithmetic of causal / sliding-window attention shared by the CUDA
// kernels and their CPU tests: which keys a query row sees (the materialized
// softmax; the flash kernels take a block's runs of keys from
// kernels/attn_block.h, attn::visible_keys) and the flat index of a
// probability (the dropout counter). Host-and-device inline functions with no
// CUDA dependency, so tests/kernels/test_cuda_launch_config.cpp checks them
// against brute force on the CPU.
//
// The mask is device.h's AttnShape: query i sees key j iff j ≤ i and, with a
// window w, i − w < j. A window is passed as an int64 here, 0 meaning none.
#pragma once
#include <cstdint>

#include "core/host_device.h"

namespace gpuledger::attn {

// The first key query row i sees.
GPL_HOST_DEVICE int64_t first_key(int64_t i, int64_t window) {
  return (window > 0 && i - window + 1 > 0) ? i - window + 1 : 0;
}

GPL_HOST_DEVICE bool visible(int64_t i, int64_t j, int64_t window) { return j <= i && j >= first_key(i, window); }

// Flat index of probability (b, h, i, j) in a (B, Hq, T, T) tensor: the
// element materialized attention's dropout draws, which flash attention draws
// too (device.h, flash_attention_forward).
GPL_HOST_DEVICE uint64_t prob_index(int64_t b, int64_t h, int64_t i, int64_t j, int64_t Hq, int64_t T) {
  return static_cast<uint64_t>(((b * Hq + h) * T + i) * T + j);
}

}  // namespace gpuledger::attn
