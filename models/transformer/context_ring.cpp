// ContextRing (see context_ring.h): the ring attention's two passes.
#include "models/transformer/context_ring.h"

#include <stdexcept>
#include <string>

#include "core/layout.h"

namespace gpuledger {
namespace {
void* offset(void* p, int64_t bytes) { return p ? static_cast<char*>(p) + bytes : nullptr; }
const void* offset(const void* p, int64_t bytes) { return p ? static_cast<const char*>(p) + bytes : nullptr; }
int64_t wrap(int64_t i, int64_t n) { return ((i % n) + n) % n; }
}  // namespace

ContextRing::ContextRing(Device& device, Comm* cp, int64_t seq, int64_t kv_block_bytes)
    : dev_(device), cp_(cp), seq_(seq), kv_bytes_(kv_block_bytes) {
  if (cp_ && cp_->size() > 1) {
    size_ = cp_->size();
    rank_ = cp_->rank();
    buffers_ = dev_.alloc(4 * kv_bytes_, Account::kComm, "cp.ring");
  }
  if (size_ > 1 && seq_ % (2 * size_) != 0)
    throw std::invalid_argument("ContextRing: seq " + std::to_string(seq_) + " does not split into 2·" +
                                std::to_string(size_) + " chunks");
}

TokenSpans ContextRing::positions(int64_t j) const {
  if (size_ == 1) return TokenSpans{};
  const CpChunks c = cp_token_chunks(seq_, size_, j);
  return TokenSpans{c.first * c.chunk_tokens, c.chunk_tokens, c.second * c.chunk_tokens};
}

AttnBlock ContextRing::block(int64_t kv_rank, int64_t T, bool accumulate) const {
  AttnBlock b;
  b.Tk = T;  // every rank holds seq / cp tokens
  b.seq = seq_;
  b.q_pos = local_positions();
  b.k_pos = positions(kv_rank);
  b.accumulate = accumulate;
  return b;
}

void ContextRing::forward(void* ctx, float* lse, const void* q, void* kv, DType t, const AttnShape& sh, float p,
                          RngKey key, bool keep_last) const {
  const int64_t half = kv_bytes_ / 2, n = kv_bytes_ / dtype_bytes(t);
  const void* held = kv;  // the K/V of rank r − i at step i
  for (int64_t i = 0; i < size_; ++i) {
    const int64_t j = wrap(rank_ - i, size_);
    // The next step's block travels while this one computes: held is only
    // read by both, and it arrives in the other pair's K/V half.
    void* next = i + 1 < size_ ? offset(buffers_.data(), (i % 2) * 2 * kv_bytes_) : nullptr;  // pair i % 2
    CommHandle arriving;
    if (i + 1 < size_)
      arriving = cp_->send_recv_start(held, n, wrap(rank_ + 1, size_), next, n, wrap(rank_ - 1, size_), t);
    dev_.flash_attention_forward(ctx, lse, q, held, offset(held, half), t, sh, p, key, block(j, sh.T, i > 0));
    if (!arriving) break;
    arriving->wait();
    held = next;
  }
  if (keep_last && held != kv) dev_.copy(kv, held, kv_bytes_);
}

void ContextRing::backward(void* dq, void* dkv, const void* dctx, const void* q, const void* kv, const void* ctx,
                           const float* lse, DType t, const AttnShape& sh, float p, RngKey key) const {
  const int64_t half = kv_bytes_ / 2, n = kv_bytes_ / dtype_bytes(t);
  const int64_t to = wrap(rank_ - 1, size_), from = wrap(rank_ + 1, size_);
  auto pair = [&](int64_t k) { return offset(buffers_.data(), (k % 2) * 2 * kv_bytes_); };  // K/V, then dK/dV
  const void* held = kv;  // iteration i: the K/V of rank r + 1 + i
  for (int64_t i = 0; i < size_; ++i) {
    const bool last = i + 1 == size_;
    // Where this iteration's dK/dV go: the partial sum arriving with the round
    // (the first iteration starts it), and at the last the rank's own gradients.
    void* grads = last ? dkv : offset(pair(i + 1), kv_bytes_);
    // The round's exchange is posted before the block computes (the block
    // reads held, which is sent, and nothing being received).
    CommHandle round;
    if (size_ > 1) {
      if (i == 0)
        round = cp_->send_recv_start(held, n, to, pair(1), n, from, t);  // K/V only
      else if (!last)
        round = cp_->send_recv_start(pair(i), 2 * n, to, pair(i + 1), 2 * n, from, t);  // K/V and the partial dK/dV
      else
        round = cp_->send_recv_start(offset(pair(i), kv_bytes_), n, to, dkv, n, from, t);  // the partial dK/dV only
    }
    const int64_t j = wrap(rank_ + 1 + i, size_);
    // From the second round on the partial sum arrives where this block's dK/dV
    // belong: the block writes them to a workspace copy, added once the round
    // is complete (TransformerEngine adds its dk_, dv_ after the wait too).
    const bool arriving = size_ > 1 && i > 0;
    Buffer block_grads;
    if (arriving) {
      block_grads = dev_.alloc(kv_bytes_, Account::kWorkspace, "cp.dkv_block");
      dev_.fill_zero(block_grads.data(), kv_bytes_);  // the block accumulates into it (as into dq)
    }
    void* out = arriving ? block_grads.data() : grads;
    dev_.flash_attention_backward(dq, out, offset(out, half), dctx, q, held, offset(held, half), ctx, lse, t, sh, p,
                                  key, block(j, sh.T, i > 0));
    if (round) round->wait();
    if (arriving) dev_.add(grads, grads, block_grads.data(), t, n);
    held = pair(i + 1);
  }
}

}  // namespace gpuledger
