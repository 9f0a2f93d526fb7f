// The serving engine (docs/architecture.md "Inference and the KV cache"): requests in,
// greedy tokens out, over an InferenceModel and a KvCache, as vLLM's
// scheduler does it (Kwon et al. 2023 §4.5; vLLM v0 Scheduler):
//
//   - a request arrives at a step (its `arrival`); waiting requests are
//     admitted first come, first served while fewer than max_batch run and the
//     cache can hold the whole prompt (KvCache::can_admit);
//   - prefill is chunked: a prefill step carries at most prefill_chunk new
//     tokens in all, continuing the running prefills first, then admitting;
//     its last chunk gives the first generated token;
//   - otherwise a decode step carries one token for every running sequence
//     (continuous batching: sequences join and leave between steps);
//   - a sequence that cannot grow (no free block, or a contiguous reservation
//     already full) preempts the most recently admitted running sequence —
//     recompute: its cache is freed and it goes back to the front of the
//     queue with its prompt and the tokens generated so far as the new
//     prompt (vLLM's PreemptionMode.RECOMPUTE). Preemptions are counted.
//   - prefix sharing: with prefix_len P > 0 every request's first P prompt
//     tokens are the same, and a newly admitted sequence takes the full
//     blocks of a running sequence that already holds them (PagedKvCache;
//     a contiguous cache shares nothing).
//
// Prefill and decode steps are timed apart (tokens/s of each); a decode step
// also reports the bytes it reads: every weight once and the kept K/V of
// every sequence in the batch (the decode roofline's numerator).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/kv/kv_cache.h"
#include "models/transformer/infer_model.h"
#include "models/transformer/request_trace.h"

namespace gpuledger {

struct InferRequest {
  int64_t id = 0;
  std::vector<int32_t> prompt;  // token ids (>= 1)
  int64_t gen_len = 1;          // tokens to generate (>= 1)
  int64_t arrival = 0;          // engine step at which it arrives
};

struct EngineOptions {
  int64_t max_batch = 256;       // running sequences at most (vLLM max_num_seqs)
  int64_t prefill_chunk = 2048;  // new tokens per prefill step (vLLM max_num_batched_tokens)
  int64_t prefix_len = 0;        // shared prompt prefix (tokens) for prefix sharing
};

struct InferResult {
  int64_t id = 0;
  std::vector<int32_t> tokens;  // the generated tokens, gen_len of them
  int64_t preemptions = 0;      // times this request was preempted
  int64_t first_token_step = -1, finish_step = -1;
};

struct EngineStats {
  int64_t steps = 0, prefill_steps = 0, decode_steps = 0;
  int64_t prefill_tokens = 0, decode_tokens = 0;  // new tokens run through the model
  double prefill_seconds = 0, decode_seconds = 0;
  int64_t decode_bytes_read = 0;                // Σ over decode steps: weights + K/V of the batch
  int64_t decode_flops = 0, prefill_flops = 0;  // executed (Device counter)
  int64_t preemptions = 0;
  int64_t prefix_tokens_shared = 0;  // tokens taken from a shared prefix at admission
  int64_t peak_running = 0;
  int64_t max_decode_batch = 0;
};

class InferenceEngine {
 public:
  InferenceEngine(InferenceModel& model, kv::KvCache& cache, EngineOptions options);
  ~InferenceEngine();

  // Serves every request to completion; results in request order. Throws
  // std::runtime_error when a request can never fit (its whole length is
  // more than an empty cache holds).
  std::vector<InferResult> run(const std::vector<InferRequest>& requests);

  const EngineStats& stats() const { return stats_; }

 private:
  struct Seq;
  void prefill_step(int64_t step);
  void decode_step(int64_t step);
  bool admit(size_t waiting_index, int64_t budget, std::vector<kv::SeqStep>& batch, std::vector<int32_t>& toks);
  void preempt(size_t running_index);
  bool grow(size_t running_index,
            int64_t tokens);  // appends, preempting the newest others; false if it was preempted itself
  void finish(size_t running_index, int64_t step);

  InferenceModel& model_;
  kv::KvCache& cache_;
  EngineOptions opt_;
  EngineStats stats_;
  std::vector<Seq*> waiting_, running_;
  std::vector<Seq> seqs_;
  std::vector<InferResult> results_;
  int64_t next_kv_id_ = 0;
};

// Token ids for each shape: request i's prompt is sequence i of the bigram
// data (models/transformer/data.h, step 0), its first prefix_len tokens those
// of sequence 0 (the shared prefix).
std::vector<InferRequest> make_requests(const std::vector<RequestShape>& shapes, int64_t vocab, uint64_t seed,
                                        int64_t prefix_len = 0);

// ---- the cost of a KV dtype: attention output vs a bf16 cache ----
struct KvErrorResult {
  double rms_error = 0, max_error = 0;  // over the outputs of one decode step
  double rms_reference = 0;             // RMS of the bf16-cache output (the error's scale)
};
// A side run of one decode step: one sequence of `context` tokens with K, V, Q
// drawn N(0, 1) (seeded), `outlier_channels` key channels (the first ones of
// every head) scaled ×50 and not read by the query (0 there), written to a
// cache of `geometry`'s format and to a bf16 cache; the query of the last
// position attends in both (one layer).
KvErrorResult kv_attention_error(Device& device, const kv::KvGeometry& geometry, int64_t q_heads, int64_t context,
                                 int64_t outlier_channels, uint64_t seed);

}  // namespace gpuledger
