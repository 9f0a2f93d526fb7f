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

void ContextRing::exchange(const void* send, int64_t n_send, void* recv, int64_t n_recv, DType t, int64_t to,
                           int64_t from) const {
  if (rank_ % 2 == 0) {
    cp_->send(send, n_send, t, to);
    cp_->recv(recv, n_recv, t, from);
  } else {
    cp_->recv(recv, n_recv, t, from);
    cp_->send(send, n_send, t, to);
  }
}

void ContextRing::forward(void* ctx, float* lse, const void* q, void* kv, DType t, const AttnShape& sh, float p,
                          RngKey key, bool keep_last) const {
  const int64_t half = kv_bytes_ / 2, n = kv_bytes_ / dtype_bytes(t);
  const void* held = kv;  // the K/V of rank r − i at step i
  for (int64_t i = 0; i < size_; ++i) {
    const int64_t j = wrap(rank_ - i, size_);
    dev_.flash_attention_forward(ctx, lse, q, held, offset(held, half), t, sh, p, key, block(j, sh.T, i > 0));
    if (i + 1 == size_) break;
    void* next = offset(buffers_.data(), (i % 2) * 2 * kv_bytes_);  // pair i % 2's K/V half
    exchange(held, n, next, n, t, wrap(rank_ + 1, size_), wrap(rank_ - 1, size_));
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
    if (size_ > 1) {
      if (i == 0)
        exchange(held, n, pair(1), n, t, to, from);  // K/V only
      else if (!last)
        exchange(pair(i), 2 * n, pair(i + 1), 2 * n, t, to, from);  // K/V and the partial dK/dV
      else
        exchange(offset(pair(i), kv_bytes_), n, dkv, n, t, to, from);  // the partial dK/dV only
    }
    const int64_t j = wrap(rank_ + 1 + i, size_);
    dev_.flash_attention_backward(dq, grads, offset(grads, half), dctx, q, held, offset(held, half), ctx, lse, t, sh, p,
                                  key, block(j, sh.T, i > 0));
    held = pair(i + 1);
  }
}

}  // namespace gpuledger
