// Device: the one interface the model and parallel code are written against
// (docs/architecture.md "Three backends"). It owns memory (every byte
// through alloc(bytes, Account), booked in the rank's Ledger), runs the op table
// below on its stream, and counts the GEMM FLOPs it executes.
//
// Each op of the table is a public non-virtual entry point (kernels/device_ops.cpp)
// that checks its arguments (kernels/op_checks.h), calls the backend's protected
// virtual <op>_impl, and counts the op's FLOPs (kernels/flop_counts.h): the
// checks and the count are written once, for every backend.
//
// Rules for code above the Device:
//   - device memory is never dereferenced; host reads go through copy_to_host;
//   - ops may be asynchronous (CUDA): synchronize() before reading timings;
//   - shapes are row-major; "(B, T, C)" comments give the layout of each pointer,
//     then its dtype (t: the op's dtype argument);
//   - 16-bit tensors are storage only: every op computes in fp32.
// Backends: kernels/cpu (the reference), kernels/meta (books bytes and FLOPs,
// touches nothing), kernels/cuda. make_device() (kernels/registry/registry.h) picks one.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/account.h"
#include "core/dtype.h"
#include "core/fp8.h"
#include "core/run_config.h"
#include "core/step_program.h"
#include "kernels/attn_block.h"
#include "kernels/kv_storage.h"
#include "kernels/ledger.h"

namespace gpuledger {

class Device;

// ---- owning handle (RAII, move-only); frees through the Device and its ledger ----
class Buffer {
 public:
  Buffer() = default;
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(); }

  void* data() const { return ptr_; }  // device pointer; nullptr on meta
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  int64_t bytes() const { return bytes_; }
  Account account() const { return account_; }
  bool empty() const { return device_ == nullptr; }
  void reset();  // frees now (unbooks the ledger)

 private:
  friend class Device;
  Device* device_ = nullptr;
  void* ptr_ = nullptr;
  int64_t bytes_ = 0;
  Account account_ = Account::kWorkspace;
};

// Counter-based RNG key (Philox4x32-10, Salmon et al. 2011). Element i of a
// draw uses counter i under this key, so every backend, and a recompute, draws
// the same mask. `stream` names the site (step, microbatch, layer, which dropout).
struct RngKey {
  uint64_t seed = 0;
  uint64_t stream = 0;
};

// C(m×n) = alpha · op(A) · op(B) + beta · C, row-major, `batch` times with
// element strides between batches. op(A) is m×k (A is k×m when trans_a).
// A and B share a dtype; C may be fp32 or the same dtype. FLOPs: 2·m·n·k·batch.
struct GemmArgs {
  // Each operand with its leading dimension and batch stride, on one line.
  // clang-format off
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr; int64_t lda = 0; int64_t stride_a = 0;
  const void* b = nullptr; int64_t ldb = 0; int64_t stride_b = 0;
  DType ab_type = DType::kFP32;
  void* c = nullptr; int64_t ldc = 0; int64_t stride_c = 0;
  DType c_type = DType::kFP32;
  int64_t batch = 1;
  float alpha = 1.0f, beta = 0.0f;
  // clang-format on
  // The operands hold FP8 values (an FP8 GEMM emulated wider, models/linear/
  // linear.cpp): what a GPU runs as an FP8 tensor-core GEMM, priced at the
  // FP8 rate by a prediction (perf/op_time.h).
  bool fp8 = false;
};

// Attention geometry: q (B, Hq, T, D), k and v (B, Hkv, T, D), Hq % Hkv == 0;
// query head h reads KV head h / (Hq / Hkv) (GQA). Causal, optional sliding
// window (keys j with i − window < j ≤ i), scale 1/sqrt(D).
struct AttnShape {
  int64_t B = 0, Hq = 0, Hkv = 0, T = 0, D = 0;
  std::optional<int64_t> window;
  float scale() const;
};

// An optimizer's hyperparameters as Device::optimizer_update takes them; each
// rule reads its own (kernels/optimizer_rules.h):
//   adamw:   lr, beta1, beta2, eps, weight_decay (decoupled)
//   sgd:     lr, momentum (0: no momentum buffer), weight_decay (added to the gradient)
//   adagrad: lr, eps, weight_decay (added to the gradient)
//   lion:    lr, beta1, beta2, weight_decay (decoupled)
struct OptimizerHyper {
  OptimizerKind kind = OptimizerKind::kAdamW;
  float lr = 0, beta1 = 0, beta2 = 0, eps = 0, momentum = 0, weight_decay = 0;
};

// One optimizer step as Device::optimizer_update hands it to a backend: the
// hyperparameters, checked, and for AdamW Adam's bias corrections of step t
// (Kingma & Ba 2015, Alg. 1), formed once in double (as PyTorch does on the
// host) and rounded to float (1 for the other rules).
struct OptimizerStep {
  OptimizerHyper hyper;
  int64_t step = 1;            // t, counted from 1
  float grad_scale = 1;        // multiplies the gradients first (clipping)
  float bias_correction1 = 1;  // 1 − β1^t
  float bias_correction2 = 1;  // 1 − β2^t
};

// The fp32 states per element each rule keeps (state1, state2 of
// Device::optimizer_update): AdamW m and v; SGD the momentum buffer (none
// with momentum 0); Adagrad the sum of squared gradients; Lion the momentum.
int optimizer_state_count(const OptimizerHyper& h);

struct MemoryInfo {
  std::optional<int64_t> free_bytes, total_bytes;  // what the device says (CUDA); none on cpu/meta
};

// Times the work a Device runs between Device::start_timer() and
// stop_seconds(). One use: stop_seconds() is called once.
class DeviceTimer {
 public:
  virtual ~DeviceTimer() = default;
  // Waits until the work queued since the start has finished; its seconds.
  virtual double stop_seconds() = 0;
};

class Device {
 public:
  Device(Ledger& ledger) : ledger_(ledger) {}
  virtual ~Device() = default;

  virtual std::string name() const = 0;                 // "cpu", "meta", "cuda"
  virtual std::string description() const = 0;          // e.g. "CPU, OpenBLAS 0.3.21, 2 threads"
  virtual bool touches_memory() const { return true; }  // false on meta
  virtual MemoryInfo memory_info() const { return {}; }
  Ledger& ledger() { return ledger_; }

  // ---- memory: every byte through here ----
  // Books the ledger first (throws OutOfMemory over the limit), then allocates.
  // Contents are unspecified; use fill_zero when zeros are needed.
  // Account::kHost allocates host memory held for this rank (swap space,
  // offloaded optimizer state) through raw_alloc_host, booked on the same
  // ledger but outside its device total: the host side of copy_to_host and
  // copy_from_host, and what the host computes on (never an op's operand).
  Buffer alloc(int64_t bytes, Account account, const std::string& what = {});
  virtual void copy_to_host(void* host_dst, const void* src, int64_t bytes) = 0;
  virtual void copy_from_host(void* dst, const void* host_src, int64_t bytes) = 0;
  virtual void copy(void* dst, const void* src, int64_t bytes) = 0;  // device to device
  virtual void fill_zero(void* dst, int64_t bytes) = 0;
  virtual void synchronize() {}

  // ---- timing (optional) ----
  // A timer of the work queued on this device from now on (ProfilingDevice
  // times each op with it). Default (device.cpp): synchronize(), the host's
  // steady_clock, synchronize() again at stop — host time, launch overheads
  // included. CUDA: a cudaEvent pair on the device's stream, read with
  // cudaEventElapsedTime (GPU time between the events; no synchronize at start).
  virtual std::unique_ptr<DeviceTimer> start_timer();

  // ---- FLOPs executed by GEMMs (incl. the products inside flash and cached
  // attention), counted by the op table's entry points ----
  int64_t executed_flops() const { return executed_flops_; }
  void reset_flops() { executed_flops_ = 0; }

  // ---- the step program (core/step_program.h): with a sink attached, every
  // op of the table reports its cost after it has run (its FLOPs from
  // flop_counts.h, its bytes from op_bytes.h, device_ops.cpp); a backend
  // reports its memory operations itself (the meta backend does: copies,
  // fills, host copies). nullptr detaches; the sink must outlive the device or
  // be detached first. ----
  void set_program_sink(StepProgramSink* sink) { program_sink_ = sink; }

  // ---- the op table (one entry per op; each backend implements its <op>_impl) ----
  // a, b, c as GemmArgs says; FLOPs gemm_flops. Nothing runs when m, n or batch is 0.
  void gemm(const GemmArgs& g);

  // Element-wise and conversion. n elements; `t` the dtype of every operand.
  // dst (n) dst_t = src (n) src_t, rounded once.
  void convert(void* dst, DType dst_t, const void* src, DType src_t, int64_t n);
  void add(void* out, const void* a, const void* b, DType t, int64_t n);             // out (n) = a (n) + b (n)
  void accumulate(void* dst, DType dst_t, const void* src, DType src_t, int64_t n);  // dst (n) += src (n)
  void scale(void* x, DType t, float alpha, int64_t n);                              // x (n) *= alpha
  // FP8 emulation (docs/formulas/fp8.md "CPU emulation"): dst (n, fp32) =
  // fp8(src·s)/s, s = FP8_MAX(f)/amax(src) over the n elements (1 when amax is
  // 0), the cast rounding to nearest even and saturating (core/fp8.h). The cpu
  // backend implements it, meta does nothing; others refuse (std::logic_error).
  void fp8_quantize_dequantize(float* dst, const void* src, DType t, int64_t n, Fp8Format f);
  // The blockwise recipe's cast: src (rows, cols) row-major in blocks of
  // block_rows × block_cols (the last ones cut by the edges), each block scaled
  // by its own s = fp8_block_scale(its amax) (core/fp8.h: a power of 2).
  void fp8_quantize_dequantize_blocks(float* dst, const void* src, DType t, int64_t rows, int64_t cols,
                                      int64_t block_rows, int64_t block_cols, Fp8Format f);

  // Bias: out (rows, cols) += bias (cols); dbias (cols) (+)= Σ_rows dout.
  void bias_add(void* out, const void* bias, DType t, int64_t rows, int64_t cols);
  void bias_backward(void* dbias, DType grad_t, const void* dout, DType t, int64_t rows, int64_t cols, bool accumulate);

  // Embedding: out (B, T, C) t = wte (V, C) t [ids (B, T) int32] (+ wpe (P, C) t
  // [positions.position(t)]: an int64 is the first of T consecutive positions;
  // context parallelism passes the rank's two chunks, attn_block.h); wpe may be
  // null. Backward accumulates dout (B, T, C) t into dwte (V, C) and dwpe (P, C) in grad_t.
  void embedding_forward(void* out, const int32_t* ids, const void* wte, const void* wpe, DType t, int64_t B, int64_t T,
                         int64_t C, const TokenSpans& positions);
  void embedding_backward(void* dwte, void* dwpe, DType grad_t, const void* dout, DType t, const int32_t* ids,
                          int64_t B, int64_t T, int64_t C, const TokenSpans& positions);

  // LayerNorm over rows of x (N, C) t: out (N, C) t = (x − mean)·rstd·w + bias with
  // w, bias (C) t; mean, rstd fp32 (N). Backward writes (accumulate_dx: adds)
  // dx (N, C) t, and accumulates dw, dbias (C) grad_t.
  void layernorm_forward(void* out, float* mean, float* rstd, const void* x, const void* w, const void* bias, DType t,
                         int64_t N, int64_t C, float eps);
  void layernorm_backward(void* dx, void* dw, void* dbias, DType grad_t, const void* dout, const void* x, const void* w,
                          const float* mean, const float* rstd, DType t, int64_t N, int64_t C, bool accumulate_dx);
  // RMSNorm: out (N, C) t = x·rstd·w, rstd fp32 (N); shapes as LayerNorm's.
  void rmsnorm_forward(void* out, float* rstd, const void* x, const void* w, DType t, int64_t N, int64_t C, float eps);
  void rmsnorm_backward(void* dx, void* dw, DType grad_t, const void* dout, const void* x, const void* w,
                        const float* rstd, DType t, int64_t N, int64_t C, bool accumulate_dx);

  // Attention layout, every tensor in t: qkv (B, T, (Hq + 2·Hkv)·D) -> q (B, Hq, T, D),
  // k, v (B, Hkv, T, D), and back (backward writes dqkv from dq, dk, dv).
  void split_qkv(void* q, void* k, void* v, const void* qkv, DType t, const AttnShape& s);
  void merge_qkv_grad(void* dqkv, const void* dq, const void* dk, const void* dv, DType t, const AttnShape& s);
  // Heads -> rows: ctx (B, Hq, T, D) -> out (B, T, Hq·D), and the reverse for gradients.
  void merge_heads(void* out, const void* ctx, DType t, const AttnShape& s);
  void split_heads(void* ctx, const void* in, DType t, const AttnShape& s);

  // RoPE (Su et al. 2021), rotate-half convention (Llama), in place on x (B, H, T, D),
  // token t at positions.position(t) (an int64: pos_offset + t), theta base.
  // Backward rotates by the opposite angle.
  void rope_forward(void* x, DType t, int64_t B, int64_t H, int64_t T, int64_t D, const TokenSpans& positions,
                    float theta);
  void rope_backward(void* dx, DType t, int64_t B, int64_t H, int64_t T, int64_t D, const TokenSpans& positions,
                     float theta);

  // Materialized attention core. scores fp32 (B, Hq, T, T) from the QKᵀ GEMM; probs
  // (B, Hq, T, T) in t = softmax(scale·scores) under the causal / window mask.
  // Backward: dscores fp32 = probs ⊙ (dprobs − Σ_j dprobs·probs) · scale.
  // With attention sinks (gpt-oss: one learned logit per query head that joins
  // every row's softmax denominator and has no value; sinks (Hq) in t):
  // probs_ij = exp(scale·s_ij) / (Σ_j exp(scale·s_ij) + exp(sinks[h])), and lse
  // (fp32, (B, Hq, T)) the log of that denominator, for attention_sinks_backward.
  // softmax_backward serves it unchanged (a sink's value is zero, so is its dprobs).
  void softmax_forward(void* probs, const float* scores, DType t, const AttnShape& s);
  void softmax_sinks_forward(void* probs, float* lse, const float* scores, const void* sinks, DType t,
                             const AttnShape& s);
  void softmax_backward(float* dscores, const float* dprobs, const void* probs, DType t, const AttnShape& s);

  // Attention sinks on the flash core's result (models/transformer/attention.cpp):
  // forward, given flash's out (B, Hq, T, D) t and lse (fp32 (B, Hq, T)), joins
  // sink h to every row's denominator: lse' = log(exp(lse) + exp(sinks[h])),
  // out ← out · exp(lse − lse'), lse ← lse'. Flash's backward, handed out and
  // lse', then recomputes the probabilities with the sink and D_i = Σ dO∘O of
  // the output with it: the gradients of q, k, v need nothing else.
  // Backward (both cores; lse the sink-inclusive one from either forward):
  // dsinks (Hq) grad_t += −Σ_{b,i} exp(sinks[h] − lse_i) · Σ_d dout·out — the
  // sink's probability times D_i, the softmax Jacobian's row for an entry whose
  // value is zero. out (B, Hq, T, D) is the core's output (the context).
  void attention_sinks_forward(void* out, float* lse, const void* sinks, DType t, const AttnShape& s);
  void attention_sinks_backward(void* dsinks, DType grad_t, const void* dout, const void* out, const float* lse,
                                const void* sinks, DType t, const AttnShape& s);

  // Dropout: keep element i iff uniform(key, i) >= p; kept values scaled by 1/(1 − p).
  // out, x (n) t; mask: uint8 (n), 1 = kept (may be null). Backward:
  // dx (n) dx_t = dout (n) dout_t · mask / (1 − p).
  void dropout_forward(void* out, uint8_t* mask, const void* x, DType t, int64_t n, float p, RngKey key);
  void dropout_backward(void* dx, DType dx_t, const void* dout, DType dout_t, const uint8_t* mask, int64_t n, float p);

  // Flash attention (Dao et al. 2022) of one block (attn_block.h): q (B, Hq, T, D) against k, v (B, Hkv, Tk, D) in
  // t, Tk = blk.Tk (T by default: the single-rank attention of the whole sequence), masked by the tokens' positions:
  // tiled online softmax, writes out (B, Hq, T, D) t and lse (fp32, (B, Hq, T): log Σ_j exp(scale·s_ij) over the
  // visible keys; −inf and out 0 for a row that sees none), or merges the block into them (blk.accumulate: context
  // parallelism's ring, models/transformer/context_ring.h). Dropout on the probabilities drawn with `key` at the flat
  // index ((b·Hq + h)·seq + pos_q(i))·seq + pos_k(j), the element materialized attention's dropout_forward uses for
  // the whole sequence, so both kinds and every split compute the same function.
  // Backward: given out and lse of the merged result (the standard flash backward reads only the final lse and
  // D_i = Σ dO∘O, so a blockwise backward of a merged forward is exact), writes (blk.accumulate: adds) dq and the
  // block's dk, dv; recomputes the tiles (and counts the recomputed QKᵀ FLOPs). The FLOPs of the full T×Tk products
  // are counted (kernels/flop_counts.h), whether or not a backend skips fully masked tiles — the convention published
  // MFU figures use.
  void flash_attention_forward(void* out, float* lse, const void* q, const void* k, const void* v, DType t,
                               const AttnShape& s, float p, RngKey key, const AttnBlock& blk = {});
  void flash_attention_backward(void* dq, void* dk, void* dv, const void* dout, const void* q, const void* k,
                                const void* v, const void* out, const float* lse, DType t, const AttnShape& s, float p,
                                RngKey key, const AttnBlock& blk = {});

  // GELU, tanh approximation (Hendrycks & Gimpel 2016; GPT-2); every tensor (n) t.
  // dx written.
  void gelu_forward(void* out, const void* x, DType t, int64_t n);
  void gelu_backward(void* dx, const void* dout, const void* x, DType t, int64_t n);
  // SwiGLU (Shazeer 2020): out = silu(gate) · up; every tensor (n) t.
  void swiglu_forward(void* out, const void* gate, const void* up, DType t, int64_t n);
  void swiglu_backward(void* dgate, void* dup, const void* dout, const void* gate, const void* up, DType t, int64_t n);
  // gpt-oss's clamped SwiGLU (transformers' GptOssExperts): g = min(gate, limit),
  // u = clamp(up, −limit, limit), out = (u + 1) · g · σ(alpha·g). Backward: the
  // clamps pass the gradient where the input lies inside (bounds included, as
  // torch.clamp's), dgate = dout·(u + 1)·σ(αg)·(1 + αg·(1 − σ(αg))), dup = dout·g·σ(αg).
  // dgate may be dout's buffer.
  void swiglu_clamped_forward(void* out, const void* gate, const void* up, DType t, int64_t n, float alpha,
                              float limit);
  void swiglu_clamped_backward(void* dgate, void* dup, const void* dout, const void* gate, const void* up, DType t,
                               int64_t n, float alpha, float limit);

  // Cross-entropy over rows of fp32 logits (N, Vp); columns >= V are padding
  // (excluded from the softmax); targets int32 (N) in [0, V). losses fp32 (N).
  // Backward: dlogits fp32 (N, Vp) = (softmax − onehot) · scale, padding columns 0.
  void cross_entropy_forward(float* losses, const float* logits, const int32_t* targets, int64_t N, int64_t Vp,
                             int64_t V);
  void cross_entropy_backward(float* dlogits, const float* logits, const int32_t* targets, int64_t N, int64_t Vp,
                              int64_t V, float scale);

  // One optimizer step (kernels/optimizer_rules.h: AdamW, SGD, Adagrad, Lion)
  // on n elements. master fp32 (n) is the parameter (or the fp32 weights
  // themselves when master == nullptr); weights (n) w_t receive the rounded
  // update; grads (n) grad_t are multiplied by grad_scale first (clipping);
  // state1, state2 fp32 (n) are the rule's states (optimizer_state_count of
  // them; the others may be null). step counts from 1. No FLOPs counted
  // (element-wise; optimizer_flops_per_elem in flop_counts.h says how many).
  void optimizer_update(float* master, void* weights, DType w_t, const void* grads, DType grad_t, float* state1,
                        float* state2, int64_t n, const OptimizerHyper& hyper, int64_t step, float grad_scale);
  // AdamW (Loshchilov & Hutter 2019): optimizer_update with moments m, v.
  void adamw(float* master, void* weights, DType w_t, const void* grads, DType grad_t, float* m, float* v, int64_t n,
             float lr, float beta1, float beta2, float eps, float weight_decay, int64_t step, float grad_scale);
  // Σ x² of x (n) t in double, read back to the host (synchronizes).
  double sum_squares(const void* x, DType t, int64_t n);

  // ---- KV cache (inference; the layout and codecs are kernels/kv_storage.h) ----
  // Writes each sequence's n_new new tokens (positions len − n_new … len − 1)
  // into their slots of the one layer `cache` views, converting from t to the
  // cache format.
  // k, v: per sequence (Hkv, n_new, D), the sequences one after another (for
  // equal n_new that is split_qkv's (B, Hkv, n, D)). Quantized formats store
  // code = encode(x / scale), saturating: per token-head, scale = amax of the
  // head's D values / qmax, stored beside the token; per tensor and per
  // channel, the scales in cache.fixed_scales — when `calibrate` is set they are
  // first set from this write (amax over every new token of every sequence:
  // of all heads and channels per tensor, per (head, channel) per channel, / qmax).
  // No FLOPs counted (not a GEMM).
  void kv_cache_write(const KvCacheView& cache, const void* k, const void* v, DType t, bool calibrate);
  // Attention of the new tokens against the cache (decode, or a prefill chunk):
  // q and out per sequence (Hq, n_new, D) in t, packed like kv_cache_write's k;
  // Hq a multiple of cache.Hkv.
  // Query r of a sequence is position i = len − n_new + r; it attends to the
  // cached keys first_key(i) … i (causal, sliding window; the new tokens must be
  // written first), query head h reads KV head h / (Hq / Hkv) (GQA), scale
  // 1/sqrt(D), K and V dequantized on read, softmax in fp32.
  // FLOPs: cached_attention_flops (kernels/flop_counts.h).
  void cached_attention(void* out, const void* q, DType t, int64_t Hq, const KvCacheView& cache);

  // ---- vocabulary-parallel embedding and cross-entropy (Megatron's
  // VocabParallelEmbedding and vocab_parallel_cross_entropy, Shoeybi et al.
  // 2019 §3): a TP rank holds rows / columns [begin, begin + rows) of the
  // padded vocabulary; the caller all-reduces the per-row partials over the
  // TP group between the ops.
  // out (N, C) t = wte (rows, C) t [ids[i] − row_begin] (ids int32 (N)) when row_begin <= ids[i] < row_begin +
  // rows, else 0 (the other ranks' partial sums complete it).
  void vocab_embedding_forward(void* out, const int32_t* ids, const void* wte, DType t, int64_t N, int64_t C,
                               int64_t row_begin, int64_t rows);
  // dwte (rows, C) grad_t += dout (N, C) t rows of the tokens this rank owns; others ignored.
  void vocab_embedding_backward(void* dwte, DType grad_t, const void* dout, DType t, const int32_t* ids, int64_t N,
                                int64_t C, int64_t row_begin, int64_t rows);
  // Logits (N, Vl) fp32 hold global columns col_begin + j; columns >= V are
  // padding (never in the softmax). row_max (N) = max over the valid local
  // columns (−inf when none); target_logit (N) = the target's logit (targets
  // int32 (N), global ids) when this rank holds its column, else 0; both fp32.
  void vocab_ce_stats(float* row_max, float* target_logit, const float* logits, const int32_t* targets, int64_t N,
                      int64_t Vl, int64_t col_begin, int64_t V);
  // In place: logits <- exp(logits − row_max) on valid columns, 0 on padding;
  // sum_exp (N) = Σ of the row (local partial sum).
  void vocab_ce_exp(float* logits, float* sum_exp, const float* row_max, int64_t N, int64_t Vl, int64_t col_begin,
                    int64_t V);
  // In place: rows of probs (N, Vl) divided by sum_exp (the global sums).
  void vocab_ce_normalize(float* probs, const float* sum_exp, int64_t N, int64_t Vl);
  // dlogits (N, Vl) fp32 = (probs − onehot(target, if held here))·scale; may alias probs.
  void vocab_ce_backward(float* dlogits, const float* probs, const int32_t* targets, int64_t N, int64_t Vl,
                         int64_t col_begin, float scale);

 protected:
  virtual void* raw_alloc(int64_t bytes) = 0;  // nullptr on failure -> OutOfMemory
  virtual void raw_free(void* p, int64_t bytes) = 0;
  // Host memory (Account::kHost). The default suits a backend whose memory is
  // the host's (cpu): the same allocator. CUDA pins it (cudaMallocHost) so that
  // copies to and from the device run at full bandwidth.
  virtual void* raw_alloc_host(int64_t bytes) { return raw_alloc(bytes); }
  virtual void raw_free_host(void* p, int64_t bytes) { raw_free(p, bytes); }

  // ---- the op table's implementations: each has the contract of the public
  // op of the same name and is called with its arguments checked
  // (kernels/op_checks.h); none counts FLOPs (the entry point does). Only
  // non-empty work arrives at gemm_impl (m, n, batch > 0), cross_entropy_*_impl
  // (N > 0) and optimizer_update_impl (n > 0), which gets the step checked and formed. ----
  virtual void gemm_impl(const GemmArgs& g) = 0;
  virtual void convert_impl(void* dst, DType dst_t, const void* src, DType src_t, int64_t n) = 0;
  virtual void add_impl(void* out, const void* a, const void* b, DType t, int64_t n) = 0;
  virtual void accumulate_impl(void* dst, DType dst_t, const void* src, DType src_t, int64_t n) = 0;
  virtual void scale_impl(void* x, DType t, float alpha, int64_t n) = 0;
  virtual void fp8_quantize_dequantize_impl(float* dst, const void* src, DType t, int64_t n, Fp8Format f);
  virtual void fp8_quantize_dequantize_blocks_impl(float* dst, const void* src, DType t, int64_t rows, int64_t cols,
                                                   int64_t block_rows, int64_t block_cols, Fp8Format f);
  virtual void bias_add_impl(void* out, const void* bias, DType t, int64_t rows, int64_t cols) = 0;
  virtual void bias_backward_impl(void* dbias, DType grad_t, const void* dout, DType t, int64_t rows, int64_t cols,
                                  bool accumulate) = 0;
  virtual void embedding_forward_impl(void* out, const int32_t* ids, const void* wte, const void* wpe, DType t,
                                      int64_t B, int64_t T, int64_t C, const TokenSpans& positions) = 0;
  virtual void embedding_backward_impl(void* dwte, void* dwpe, DType grad_t, const void* dout, DType t,
                                       const int32_t* ids, int64_t B, int64_t T, int64_t C,
                                       const TokenSpans& positions) = 0;
  virtual void layernorm_forward_impl(void* out, float* mean, float* rstd, const void* x, const void* w,
                                      const void* bias, DType t, int64_t N, int64_t C, float eps) = 0;
  virtual void layernorm_backward_impl(void* dx, void* dw, void* dbias, DType grad_t, const void* dout, const void* x,
                                       const void* w, const float* mean, const float* rstd, DType t, int64_t N,
                                       int64_t C, bool accumulate_dx) = 0;
  virtual void rmsnorm_forward_impl(void* out, float* rstd, const void* x, const void* w, DType t, int64_t N, int64_t C,
                                    float eps) = 0;
  virtual void rmsnorm_backward_impl(void* dx, void* dw, DType grad_t, const void* dout, const void* x, const void* w,
                                     const float* rstd, DType t, int64_t N, int64_t C, bool accumulate_dx) = 0;
  virtual void split_qkv_impl(void* q, void* k, void* v, const void* qkv, DType t, const AttnShape& s) = 0;
  virtual void merge_qkv_grad_impl(void* dqkv, const void* dq, const void* dk, const void* dv, DType t,
                                   const AttnShape& s) = 0;
  virtual void merge_heads_impl(void* out, const void* ctx, DType t, const AttnShape& s) = 0;
  virtual void split_heads_impl(void* ctx, const void* in, DType t, const AttnShape& s) = 0;
  virtual void rope_forward_impl(void* x, DType t, int64_t B, int64_t H, int64_t T, int64_t D,
                                 const TokenSpans& positions, float theta) = 0;
  virtual void rope_backward_impl(void* dx, DType t, int64_t B, int64_t H, int64_t T, int64_t D,
                                  const TokenSpans& positions, float theta) = 0;
  virtual void softmax_forward_impl(void* probs, const float* scores, DType t, const AttnShape& s) = 0;
  virtual void softmax_sinks_forward_impl(void* probs, float* lse, const float* scores, const void* sinks, DType t,
                                          const AttnShape& s) = 0;
  virtual void softmax_backward_impl(float* dscores, const float* dprobs, const void* probs, DType t,
                                     const AttnShape& s) = 0;
  virtual void attention_sinks_forward_impl(void* out, float* lse, const void* sinks, DType t, const AttnShape& s) = 0;
  virtual void attention_sinks_backward_impl(void* dsinks, DType grad_t, const void* dout, const void* out,
                                             const float* lse, const void* sinks, DType t, const AttnShape& s) = 0;
  virtual void dropout_forward_impl(void* out, uint8_t* mask, const void* x, DType t, int64_t n, float p,
                                    RngKey key) = 0;
  virtual void dropout_backward_impl(void* dx, DType dx_t, const void* dout, DType dout_t, const uint8_t* mask,
                                     int64_t n, float p) = 0;
  // blk arrives resolved: Tk and seq set (never 0).
  virtual void flash_attention_forward_impl(void* out, float* lse, const void* q, const void* k, const void* v, DType t,
                                            const AttnShape& s, float p, RngKey key, const AttnBlock& blk) = 0;
  virtual void flash_attention_backward_impl(void* dq, void* dk, void* dv, const void* dout, const void* q,
                                             const void* k, const void* v, const void* out, const float* lse, DType t,
                                             const AttnShape& s, float p, RngKey key, const AttnBlock& blk) = 0;
  virtual void gelu_forward_impl(void* out, const void* x, DType t, int64_t n) = 0;
  virtual void gelu_backward_impl(void* dx, const void* dout, const void* x, DType t, int64_t n) = 0;
  virtual void swiglu_forward_impl(void* out, const void* gate, const void* up, DType t, int64_t n) = 0;
  virtual void swiglu_clamped_forward_impl(void* out, const void* gate, const void* up, DType t, int64_t n, float alpha,
                                           float limit) = 0;
  virtual void swiglu_clamped_backward_impl(void* dgate, void* dup, const void* dout, const void* gate, const void* up,
                                            DType t, int64_t n, float alpha, float limit) = 0;
  virtual void swiglu_backward_impl(void* dgate, void* dup, const void* dout, const void* gate, const void* up, DType t,
                                    int64_t n) = 0;
  virtual void cross_entropy_forward_impl(float* losses, const float* logits, const int32_t* targets, int64_t N,
                                          int64_t Vp, int64_t V) = 0;
  virtual void cross_entropy_backward_impl(float* dlogits, const float* logits, const int32_t* targets, int64_t N,
                                           int64_t Vp, int64_t V, float scale) = 0;
  virtual void optimizer_update_impl(float* master, void* weights, DType w_t, const void* grads, DType grad_t,
                                     float* state1, float* state2, int64_t n, const OptimizerStep& update) = 0;
  virtual double sum_squares_impl(const void* x, DType t, int64_t n) = 0;
  virtual void kv_cache_write_impl(const KvCacheView& cache, const void* k, const void* v, DType t, bool calibrate) = 0;
  virtual void cached_attention_impl(void* out, const void* q, DType t, int64_t Hq, const KvCacheView& cache) = 0;
  virtual void vocab_embedding_forward_impl(void* out, const int32_t* ids, const void* wte, DType t, int64_t N,
                                            int64_t C, int64_t row_begin, int64_t rows) = 0;
  virtual void vocab_embedding_backward_impl(void* dwte, DType grad_t, const void* dout, DType t, const int32_t* ids,
                                             int64_t N, int64_t C, int64_t row_begin, int64_t rows) = 0;
  virtual void vocab_ce_stats_impl(float* row_max, float* target_logit, const float* logits, const int32_t* targets,
                                   int64_t N, int64_t Vl, int64_t col_begin, int64_t V) = 0;
  virtual void vocab_ce_exp_impl(float* logits, float* sum_exp, const float* row_max, int64_t N, int64_t Vl,
                                 int64_t col_begin, int64_t V) = 0;
  virtual void vocab_ce_normalize_impl(float* probs, const float* sum_exp, int64_t N, int64_t Vl) = 0;
  virtual void vocab_ce_backward_impl(float* dlogits, const float* probs, const int32_t* targets, int64_t N, int64_t Vl,
                                      int64_t col_begin, float scale) = 0;

  // For a decorating device (ProfilingDevice) to allocate through the device it wraps.
  static void* raw_alloc_of(Device& d, int64_t bytes) { return d.raw_alloc(bytes); }
  static void raw_free_of(Device& d, void* p, int64_t bytes) { d.raw_free(p, bytes); }
  static void* raw_alloc_host_of(Device& d, int64_t bytes) { return d.raw_alloc_host(bytes); }
  static void raw_free_host_of(Device& d, void* p, int64_t bytes) { d.raw_free_host(p, bytes); }
  StepProgramSink* program_sink() const { return program_sink_; }

 private:
  friend class Buffer;
  void release(Buffer& b);
  void count_flops(int64_t flops) { executed_flops_ += flops; }
  Ledger& ledger_;
  int64_t executed_flops_ = 0;
  StepProgramSink* program_sink_ = nullptr;
};

}  // namespace gpuledger
