// Index arithmetic of causal / sliding-window attention shared by the CUDA
// kernels and their CPU tests: which keys a query row sees, which key tiles a
// query tile visits, which query tiles see a key tile, and the flat index of a
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

// Key tiles (of bc keys, starting at multiples of bc) that query rows
// [i0, i0 + nr) visit: k0 from key_tile_begin to below key_tile_end. Tiles
// outside hold no key any of these rows sees.
GPL_HOST_DEVICE int64_t key_tile_begin(int64_t i0, int64_t window, int64_t bc) {
  return first_key(i0, window) / bc * bc;
}
GPL_HOST_DEVICE int64_t key_tile_end(int64_t i0, int64_t nr) { return i0 + nr; }

// Query tiles (of bq rows) that see some key of [k0, k0 + nk): qt from
// query_tile_first to query_tile_last inclusive. Row i sees key j only if
// i ≥ j (so i ≥ k0), and, with a window w, only if i < j + w ≤ k0 + nk − 1 + w.
GPL_HOST_DEVICE int64_t query_tile_first(int64_t k0, int64_t bq) { return k0 / bq; }
GPL_HOST_DEVICE int64_t query_tile_last(int64_t k0, int64_t nk, int64_t T, int64_t window, int64_t bq) {
  int64_t last_row = T - 1;
  if (window > 0 && k0 + nk - 2 + window < last_row) last_row = k0 + nk - 2 + window;
  return last_row / bq;
}

// Flat index of probability (b, h, i, j) in a (B, Hq, T, T) tensor: the
// element materialized attention's dropout draws, which flash attention draws
// too (device.h, flash_attention_forward).
GPL_HOST_DEVICE uint64_t prob_index(int64_t b, int64_t h, int64_t i, int64_t j, int64_t Hq, int64_t T) {
  return static_cast<uint64_t>(((b * Hq + h) * T + i) * T + j);
}

}  // namespace gpuledger::attn
