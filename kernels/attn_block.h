// The positions of a rank's tokens in their sequence and one block of flash
// attention between two sets of tokens: the vocabulary the flash op
// (device.h, flash_attention_forward / _backward), RoPE and the embedding take,
// shared as host-and-device inline functions by the CPU reference, the CUDA
// kernels (kernels/cuda/attn_tiles.h) and their tests.
//
// Context parallelism (docs/formulas/context-parallel.md) holds two chunks of
// every sequence on a rank (core/layout.h, cp_token_chunks): chunks r and
// 2·cp − 1 − r. TokenSpans says where each local token sits; an attention
// block of the rank's queries against the keys of any rank (its own, or a
// block visiting over the ring) is then masked by the global positions: query
// i sees key j iff pos_k(j) ≤ pos_q(i) (and, with a window w,
// pos_q(i) − w < pos_k(j)). Within a span positions are consecutive and the
// second span lies after the first, so the keys a query sees are one
// contiguous run [begin, end) of the key block, and both ends grow with i: a
// per-query count of visible keys, computed from six integers rather than
// stored. The single-rank case is the square block with one span from 0.
#pragma once
#include <cstdint>

#include "core/host_device.h"

namespace gpuledger {

// Token i of a local run sits at position start + i for i < split, at
// second_start + (i − split) from split on. An int64 converts to one span
// from that position (the single-rank case, or a chunk of a prefill).
struct TokenSpans {
  static constexpr int64_t kNoSplit = INT64_MAX;
  int64_t start = 0;
  int64_t split = kNoSplit;
  int64_t second_start = 0;

  TokenSpans() = default;
  TokenSpans(int64_t first_position) : start(first_position) {}  // NOLINT(google-explicit-constructor)
  TokenSpans(int64_t start_, int64_t split_, int64_t second_start_)
      : start(start_), split(split_), second_start(second_start_) {}

  GPL_HOST_DEVICE int64_t position(int64_t i) const { return i < split ? start + i : second_start + (i - split); }
  // How many of the first n tokens sit at a position ≤ p.
  GPL_HOST_DEVICE int64_t count_at_or_before(int64_t p, int64_t n) const {
    const int64_t n0 = split < n ? split : n;
    int64_t a = p - start + 1;
    a = a < 0 ? 0 : (a > n0 ? n0 : a);
    if (n <= n0) return a;
    int64_t b = p - second_start + 1;
    b = b < 0 ? 0 : (b > n - n0 ? n - n0 : b);
    return a + b;
  }
};

// One block of flash attention: AttnShape's T queries (positions q_pos)
// against Tk keys and values (positions k_pos), in a sequence of seq tokens.
//   causal      key j visible to query i iff pos_k(j) ≤ pos_q(i) (and the
//               window); false: every key visible (no window allowed).
//   accumulate  forward: out and lse hold the result of earlier blocks of the
//               same queries (lse −inf where none was visible); this block is
//               merged into them by the log-sum-exp — the online softmax of
//               Dao et al. 2022, Alg. 1, continued across blocks, the merge
//               TransformerEngine's ring attention does after each step
//               (flash_attn_fwd_out_correction). Backward: dq, dk, dv are
//               added to instead of written.
// Dropout draws probability (b, h, pos_q(i), pos_k(j)) at the flat index of
// the (B, Hq, seq, seq) tensor, so a block draws what the single-rank
// attention of the whole sequence draws for the same pair.
// Tk and seq of 0 mean T (the square single-rank block).
struct AttnBlock {
  int64_t Tk = 0;
  int64_t seq = 0;
  TokenSpans q_pos, k_pos;
  bool causal = true;
  bool accumulate = false;
};

namespace attn {

// The keys query row i sees: [begin, end) of the key block (empty: begin >= end).
struct KeyRun {
  int64_t begin = 0, end = 0;
};

// window 0: none. Tk: keys in the block.
GPL_HOST_DEVICE KeyRun visible_keys(const AttnBlock& blk, int64_t Tk, int64_t window, int64_t i) {
  if (!blk.causal) return KeyRun{0, Tk};
  const int64_t p = blk.q_pos.position(i);
  KeyRun r;
  r.end = blk.k_pos.count_at_or_before(p, Tk);
  r.begin = window > 0 ? blk.k_pos.count_at_or_before(p - window, Tk) : 0;
  return r;
}

}  // namespace attn
}  // namespace gpuledger
