// ContextRing: the flash attention core of a layer over the context-parallel
// ring (docs/formulas/context-parallel.md). Each of the cp ranks holds 2 of
// the 2·cp chunks of every sequence (core/layout.h, cp_token_chunks) and its
// own queries, keys and values; the ring passes K/V blocks so that the rank's
// queries meet every rank's keys, one flash block (kernels/attn_block.h) per
// step, masked by the tokens' positions and merged into the output by its
// log-sum-exp. With one rank (no ring, or a comm of one) the same code runs
// the single block of the whole sequence: the single-rank flash attention.
//
// As TransformerEngine's AttnFuncWithCPAndKVP2P
// (transformer_engine/pytorch/attention/dot_product_attention/
// context_parallel.py at d0067d0da6cb01811b8072a7d304f0e00344ce2b):
//   forward   step i = 0 … cp − 1 attends to the K/V of rank r − i, received
//             from r − 1 at step i − 1 (cp − 1 messages of B_kv bytes); the
//             block last received (rank r + 1's) is what TE saves for the
//             backward (`kv = p2p_comm_buffers[-1]`), and here replaces the
//             rank's own K/V in the saved Q K V, so the activations stay those
//             of s/cp tokens.
//   backward  the ring runs the other way: iteration i holds the K/V of rank
//             r + 1 + i (the saved block first, the rank's own last), receives
//             from r + 1 and sends to r − 1 — round 0 the K/V only, rounds
//             1 … cp − 2 the K/V and the dK/dV partial sum of the block in one
//             message, round cp − 1 the partial sum only, which then holds the
//             gradients of the rank's own K/V: cp messages, 2·(cp − 1)·B_kv bytes.
//   buffers   two (K/V, dK/dV) pairs, 4·B_kv, booked under comm for the ring's
//             life (the forward uses the pairs' K/V halves).
// The merge: each block's output and lse enter the op's online softmax
// (AttnBlock::accumulate) — out·e^{lse_old − lse_new} + block part, TE's
// flash_attn_fwd_out_correction — so out is the merged result in the
// compute dtype after every step. The backward of every block takes that
// merged out and lse (the flash backward needs only those and D_i = Σ dO∘O),
// so merged forward + blockwise backward is the gradient of the whole attention.
// Overlap: each round's send and receive are posted together, non-blocking
// (Comm::send_recv_start: MPI_Isend/MPI_Irecv, ncclSend/ncclRecv on the comm
// stream), before the round's block computes, and waited for after it — the
// next K/V block travels while the current one computes, as TE's
// AttnFuncWithCPAndKVP2P posts its exchange before each step's attention. In
// the backward, from the second round on, the block's dK/dV go to a workspace
// copy (B_kv, "cp.dkv_block") added into the arriving partial sum after the
// wait. A comm that cannot overlap (the simulated one) runs the pair blocking
// inside the start: the same messages, calls and bytes.
#pragma once
#include <cstdint>

#include "comm/comm.h"
#include "kernels/device.h"

namespace gpuledger {

class ContextRing {
 public:
  // cp: the ring (null or one rank: no ring). seq: tokens of the whole
  // sequence; the rank holds seq / cp of them. kv_block_bytes: B_kv, its K and
  // V (both (B, Hkv, seq / cp, D)).
  ContextRing(Device& device, Comm* cp, int64_t seq, int64_t kv_block_bytes);

  int64_t size() const { return size_; }
  int64_t rank() const { return rank_; }
  int64_t local_tokens() const { return seq_ / size_; }
  // Positions of cp rank j's local tokens (its two chunks; one span from 0 without a ring).
  TokenSpans positions(int64_t j) const;
  TokenSpans local_positions() const { return positions(rank_); }

  // ctx (B, Hq, T, D), lse (B, Hq, T) fp32 = attention of q (B, Hq, T, D) to
  // every rank's K/V; kv: the rank's K then V (kv_block_bytes). keep_last: kv
  // is then overwritten with the block the backward starts from (rank r + 1's;
  // the forward of a core whose tensors are not kept leaves it as it is).
  void forward(void* ctx, float* lse, const void* q, void* kv, DType t, const AttnShape& sh, float p, RngKey key,
               bool keep_last) const;
  // dq (B, Hq, T, D) and dkv (the gradients of the rank's own K then V), given
  // ctx and lse of the forward and kv as forward(keep_last) left it.
  void backward(void* dq, void* dkv, const void* dctx, const void* q, const void* kv, const void* ctx, const float* lse,
                DType t, const AttnShape& sh, float p, RngKey key) const;

 private:
  AttnBlock block(int64_t kv_rank, int64_t T, bool accumulate) const;

  Device& dev_;
  Comm* cp_;
  int64_t size_ = 1, rank_ = 0, seq_ = 0, kv_bytes_ = 0;
  Buffer buffers_;  // comm: 2 × (K/V, dK/dV), cp > 1
};

}  // namespace gpuledger
