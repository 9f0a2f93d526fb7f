// The serving engine (docs/serving.md): requests in, greedy tokens out, over an
// InferenceModel and a KvCache, scheduled as vLLM v1's Scheduler.schedule does
// it (vllm-project/vllm at commit 002f349, vllm/v1/core/sched/scheduler.py;
// Kwon et al. 2023 §4.5):
//
//   - one kind of step, under a token budget (max_num_batched_tokens, vLLM's
//     name and meaning): first one token for every running sequence that
//     decodes, then the chunks of the running prefills, oldest first, then
//     waiting requests admitted first come, first served while fewer than
//     max_batch run, the cache can hold the whole prompt and tokens remain —
//     each prefill chunk at most the budget left. A step may so carry decode
//     tokens and prefill chunks together (a mixed batch): a long prompt does not
//     stall the decodes. The last chunk of a prefill gives its first token.
//   - a sequence that cannot grow (no free block) preempts the most recently
//     admitted running sequence not already scheduled in this step —
//     recompute: its cache is freed and it goes back to the front of the queue
//     with its prompt and the tokens generated so far as the new prompt
//     (vLLM's preemption; v1 preempts by recompute only). Or, with a swap
//     space (EngineOptions::swap, paged caches), by swap: its blocks go to host
//     memory (models/kv/kv_swap.h) and it waits in the swapped queue, which is
//     served first at the start of every step — swapped back in, oldest first,
//     when its blocks and one more token fit — and resumes where it stopped.
//     Preemptions, swaps and the bytes moved each way are counted.
//   - prefix caching (paged caches without a window): a waiting request's
//     tokens are hashed block by block (models/kv/block_hash.h) and its
//     leading full blocks found in the cache are taken by reference, however
//     they got there — a running sequence, one admitted earlier in this very
//     step, or a finished one whose blocks are still on the free queue
//     (models/kv/block_manager.h). Hits are counted in tokens and blocks.
//   - a request arrives at a step (`arrival`) and not before the engine clock
//     reaches `arrival_s`. The clock advances by each step's seconds: measured
//     (the step's forward, synchronized) unless EngineOptions::step_seconds
//     models it; when nothing runs or waits it jumps to the next arrival.
//
// A step carrying any prefill tokens is a prefill step for the throughput
// figures (mixed ones counted apart too); a decode step carries decodes alone
// and reports the bytes it reads: every weight once and the kept K/V of every
// sequence in the batch (the decode roofline's numerator).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "models/kv/kv_cache.h"
#include "models/kv/kv_swap.h"
#include "models/transformer/infer_model.h"
#include "models/transformer/request_trace.h"

namespace gpuledger {

struct InferRequest {
  int64_t id = 0;
  std::vector<int32_t> prompt;  // token ids (>= 1)
  int64_t gen_len = 1;          // tokens to generate (>= 1)
  int64_t arrival = 0;          // engine step at which it arrives
  double arrival_s = 0;         // engine clock (seconds) at which it arrives
};

// What one step ran: the step clock's input.
struct StepCost {
  int64_t tokens = 0;           // new tokens (decodes + prefill chunks)
  int64_t flops = 0;            // executed (Device counter)
  int64_t bytes_read = 0;       // weights once + the kept K/V of every sequence in the batch
  double measured_seconds = 0;  // the forward, synchronized, on the host's steady clock
};

struct EngineOptions {
  EngineOptions() = default;
  EngineOptions(int64_t batch, int64_t batched_tokens, bool caching = true)
      : max_batch(batch), max_num_batched_tokens(batched_tokens), prefix_caching(caching) {}
  int64_t max_batch = 256;                // running sequences at most (vLLM max_num_seqs)
  int64_t max_num_batched_tokens = 2048;  // new tokens per step, decodes and prefill chunks together
  bool prefix_caching = true;             // by block hash, paged caches without a window (vLLM v1's default)
  // The engine clock's seconds for a step; empty: the measured seconds.
  std::function<double(const StepCost&)> step_seconds;
  bool record_steps = false;        // keep EngineStats::step_log
  kv::KvSwapSpace* swap = nullptr;  // preemption by swap (paged caches); none: by recompute
};

// One step's composition (EngineOptions::record_steps).
struct StepRecord {
  int64_t decode_tokens = 0;
  std::vector<std::pair<int64_t, int64_t>> prefill_chunks;  // (request id, tokens)
  double end_s = 0;                                         // the engine clock after it
};

struct InferResult {
  int64_t id = 0;
  std::vector<int32_t> tokens;  // the generated tokens, gen_len of them
  int64_t preemptions = 0;      // times this request was preempted
  int64_t first_token_step = -1, finish_step = -1;
  // The engine clock: arrival (its arrival_s, or the start of its arrival
  // step), the end of the step giving its first token and its last.
  double arrival_s = 0, first_token_s = 0, finish_s = 0;
};

struct EngineStats {
  // prefill steps carry prefill tokens (mixed ones among them); decode steps decodes alone
  int64_t steps = 0, prefill_steps = 0, decode_steps = 0, mixed_steps = 0;
  int64_t prefill_tokens = 0, decode_tokens = 0;   // new tokens run through the model, all steps
  int64_t decode_step_tokens = 0;                  // the decode tokens of decode steps
  double prefill_seconds = 0, decode_seconds = 0;  // engine clock, by kind of step
  int64_t decode_bytes_read = 0;                   // Σ over decode steps: weights + K/V of the batch
  int64_t decode_weight_bytes_read = 0;            // … of which the weights
  // A MoE model: Σ over decode steps and layers of the distinct experts the
  // step routed to; and the decode steps by batch size (what the model of the
  // expected count, analytic/inference.h, is evaluated on).
  int64_t decode_experts_routed = 0;
  std::map<int64_t, int64_t> decode_steps_by_batch;
  int64_t decode_flops = 0, prefill_flops = 0;  // executed (Device counter), by kind of step
  int64_t preemptions = 0;
  int64_t swap_outs = 0, swap_ins = 0;            // preemption by swap
  int64_t swap_out_bytes = 0, swap_in_bytes = 0;  // device → host, host → device
  int64_t prefix_tokens_shared = 0;               // prefix-cache hit tokens at admission
  int64_t prefix_hit_blocks = 0;                  // … in blocks
  int64_t prefix_query_tokens = 0;                // prompt tokens looked up at admission (vLLM's queries)
  int64_t peak_running = 0;
  int64_t max_decode_batch = 0;
  double clock_s = 0;  // the engine clock at the end
  std::vector<StepRecord> step_log;
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
  struct Batch;
  Batch schedule(int64_t step);
  void execute(Batch& batch, int64_t step);
  void add(Batch& b, Seq* s, int64_t tokens);
  bool admit(int64_t budget, int64_t step, Batch& batch);
  void preempt(size_t running_index);
  // Appends to running sequence i, preempting the newest sequences not yet
  // scheduled in `step`; false when it cannot (it preempted itself, or the
  // newest is already in the batch).
  bool grow(size_t running_index, int64_t tokens, int64_t step);
  void finish(size_t running_index, int64_t step);
  int64_t step_kv_bytes(const Batch& b) const;

  InferenceModel& model_;
  kv::KvCache& cache_;
  EngineOptions opt_;
  EngineStats stats_;
  std::vector<Seq*> waiting_, running_, swapped_;
  void swap_in_waiting();
  std::vector<Seq> seqs_;
  std::vector<InferResult> results_;
  int64_t next_kv_id_ = 0;
  double clock_s_ = 0;
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
