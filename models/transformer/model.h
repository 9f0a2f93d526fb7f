// StageModel: the part of the transformer one pipeline stage runs, for one
// tensor-parallel rank — the embedding (first stage: word embedding, + learned
// positions for gpt, dropout), its contiguous layers, and on the last stage
// the final norm, the head GEMM into fp32 logits and the cross-entropy loss.
// With virtual stages (Layout::vpp > 1) its layers are vpp model chunks of
// contiguous layers each (ParamLayout::global_layer); a forward runs one
// chunk, the embedding only in chunk 0 of the first stage and the head only in
// the last chunk of the last stage.
//
// Microbatches are slots: forward(slot) saves that microbatch's tensors
// (account activations, docs/exact-budget.md "Activations" and "Stage
// extras"), backward(slot) consumes them, so any number may be in flight
// (GPipe holds all m, 1F1B up to pp − stage; interleaved 1F1B one slot per
// (microbatch, chunk) in flight).
//   first stage saves: token ids (int32), the embedding dropout mask;
//   every layer: its input (the embedding output / previous layer's output)
//                plus what TransformerLayer saves;
//   last stage saves: final-norm input (the last layer's output), statistics
//                and output, logits (fp32, b·s·V'/t), targets (int32).
// The logits gradient is computed in place over the logits (the op allows it).
//
// The loss: mean over every token of the global batch; backward(slot, scale)
// seeds d(token loss) = scale = 1/(tokens in the global batch).
// Dropout streams: (run.seed, rng_stream_id(step, global sample offset of the
// microbatch, layer, site)), site 0 the embedding (layer 0), 1 attention
// probabilities, 2 attention-out, 3 MLP-out — the same masks on every layout
// that splits the batch into the same microbatches (the sample offset must be
// < 2¹⁶, rng_stream_id's field). Under TP the attention-probability masks are
// indexed by the rank's local heads, so with dropout > 0 a TP layout draws
// other attention masks than one rank (Megatron too draws them from a
// per-TP-rank RNG state); the hidden-sized masks are the same on every TP rank
// without sp; under sp each rank draws its own shard's (layer.h hidden_key),
// so they are not one rank's masks either.
//
// Pipeline extension points: a non-first stage takes its input
// from `stage_input` (the received activation, copied into its saved layer
// input), a non-last stage writes its output to `stage_output` (the send
// buffer); backward takes `output_grad` there and writes `input_grad`.
// Tensor parallelism (t > 1): the word embedding and the head are
// vocabulary-parallel (Megatron's VocabParallelEmbedding and
// vocab_parallel_cross_entropy): TP rank r holds rows [r·V'/t, (r+1)·V'/t).
//   embedding: ids outside the rank's rows look up zeros; the partial outputs
//     are all-reduced over tp (sp: reduce-scattered to the token shards);
//     gpt's positions (replicated) are added after, on the shard under sp;
//     backward accumulates the rank's own rows only (sp: the gradient is
//     all-gathered first).
//   head: logits (b·s × V'/t, fp32) from the full final-norm output (sp:
//     all-gathered, and again in backward); the loss needs three all-reduces
//     of b·s fp32 over tp — the row max (max), the target's logit and the sum
//     of exp(logit − max) — after which the logits are overwritten in place
//     with the probabilities (Megatron does the same) so the backward is
//     local; padding columns (global index >= V) are masked out. The head
//     input gradient is all-reduced (sp: reduce-scattered).
// Under sp (layout.sp) the residual stream between layers, the embedding's
// and the final norm's tensors are the rank's token shard (layer.h), and
// stage_input / stage_output / output_grad / input_grad are shards too.
// Gradients that TP ranks hold only in part — under sp the replicated tensors
// computed on shards (norm γ β, gpt's row-parallel biases and positions), and
// with t > k the K/V rows of replicated KV heads, and with or without sp
// MLA's down projections and latent norms (TensorSlot::tp_partial_grad) — are summed over tp by
// reduce_tp_partial_grads, which the training step calls after the last
// microbatch's backward (docs/formulas/comm.md "Sequence-partial gradients";
// the tensors are TensorSlot::replicated_over_tp).
#pragma once
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "comm/comm.h"
#include "core/layout.h"
#include "core/model_config.h"
#include "core/run_config.h"
#include "kernels/device.h"
#include "models/moe/expert_bias.h"
#include "models/transformer/layer.h"
#include "models/transformer/params.h"
#include "models/transformer/unit_hooks.h"

namespace gpuledger {

inline constexpr uint64_t kSiteEmbedding = 0, kSiteAttnProbs = 1, kSiteAttnOut = 2, kSiteMlpOut = 3;

class StageModel {
 public:
  // ep: the expert-parallel group when layout.ep > 1 (MoE models; its size layout.ep).
  // cp: the context-parallel ring (layout.cp ranks; null when cp = 1). With
  // it the stage runs the rank's run.seq / cp tokens of every sequence (the
  // ids and targets it takes are those, core/layout.h cp_local_tokens), at
  // their positions, and the flash core over the ring (context_ring.h).
  StageModel(Device& device, Comm& tp, const ModelConfig& model, const RunConfig& run, const Layout& layout,
             const Coords& coords, Params& params, Comm* ep = nullptr, Comm* cp = nullptr);
  ~StageModel();

  // Forward of one microbatch through model chunk `chunk` (0 … vpp − 1: the
  // chunk's layers, ParamLayout::global_layer) into `slot`. The embedding runs
  // in chunk 0 of the first stage, which takes ids (b × s, host); the head in
  // the last chunk of the last stage, which takes targets (b × s, host) and
  // returns the sum of the token losses (read back to the host); 0 elsewhere.
  // Every other chunk reads stage_input and writes stage_output.
  double forward(int64_t slot, int64_t step, int64_t sample_offset, const int32_t* host_ids,
                 const int32_t* host_targets, const void* stage_input = nullptr, void* stage_output = nullptr,
                 int64_t chunk = 0);
  // Backward of the microbatch in `slot` (through the chunk its forward ran); frees its saved tensors.
  void backward(int64_t slot, float loss_scale, const void* output_grad = nullptr, void* input_grad = nullptr);

  // Drops the saved tensors of `slot` without a backward (evaluation only).
  void discard(int64_t slot);

  int64_t in_flight() const;  // slots holding a forward's saved tensors

  // The per-unit hooks (unit_hooks.h), set once before the first forward;
  // nullptr: none. The caller keeps them alive while the model runs.
  void set_unit_hooks(UnitHooks* hooks) { hooks_ = hooks; }
  // Re-reads a layer unit's LayerParams from Params (the layer keeps pointers
  // from its construction; a unit's weights moved, e.g. into a gathered
  // copy, are read at their new address). The embedding and head read Params
  // on every use and need none.
  void rebind_layer_unit(size_t unit);
  // The shared layer config with local layer i's own attention window.
  LayerConfig local_layer_config(int64_t local_layer) const;

  // Sums over tp the partial gradients of every unit (see above): one
  // all_reduce per tensor. A no-op when t = 1 or nothing is partial.
  void reduce_tp_partial_grads();
  // The same for one unit, on `unit_grads` (the unit's gradient buffer in
  // layout order, dtype g; e.g. a staging buffer of the unit's full gradient).
  void reduce_tp_partial_grads(size_t unit, void* unit_grads);
  const LayerConfig& layer_config() const { return lcfg_; }
  // MoE: the routing choices dropped past an expert's capacity by the
  // forwards since the last call (every layer and microbatch of the stage).
  int64_t take_moe_dropped_choices() { return std::exchange(moe_dropped_choices_, 0); }
  // router_bias (DeepSeek-V3): the step's expert-bias update over `group` (the
  // data-parallel group with cp, models/moe/expert_bias.h); a no-op without a bias.
  void update_expert_bias(Comm& group);
  // Local layer i's expert bias on the host (empty without a bias or for a dense layer).
  std::vector<float> expert_bias(int64_t local_layer) const;

 private:
  struct Slot;
  LayerKeys keys(int64_t step, int64_t sample_offset, int64_t layer) const;
  RngKey key(int64_t step, int64_t sample_offset, int64_t layer, uint64_t site) const;
  void norm_forward(void* out, float* stats, const void* x, const void* w, const void* b);
  void unit_hook(int unit, bool backward, bool begin);
  double head_forward(Slot& s, const int32_t* host_targets);
  void head_backward(Slot& s, float loss_scale, void* dres);
  void embedding_forward(Slot& s, const int32_t* host_ids);
  void embedding_backward(Slot& s, void* dres);
  // out (tokens_local × h) += the learned positions of the rank's tokens; and the transpose.
  void add_positions(void* out, const void* wpe);
  void positions_backward(void* dwpe, const void* dout);
  RngKey hidden_key(RngKey k) const;
  TpRegion tp_region() const {
    return TpRegion{dev_, tp_, lcfg_.sp, lcfg_.tokens(), lcfg_.h, lcfg_.e};
  }  // the layer's rule (layer.h): sp shards draw their own mask
  int64_t token_begin() const { return lcfg_.sp ? tp_rank_ * lcfg_.tokens_local() : 0; }

  Device& dev_;
  Comm& tp_;
  ModelConfig model_;
  RunConfig run_;
  Params& params_;
  LayerConfig lcfg_;
  bool first_, last_;
  int64_t tp_size_, tp_rank_;
  int64_t vocab_begin_ = 0;            // first padded-vocabulary row of this rank
  std::unique_ptr<ContextRing> ring_;  // cp > 1
  std::vector<std::unique_ptr<TransformerLayer>> layers_;
  std::vector<std::unique_ptr<Slot>> slots_;
  UnitHooks* hooks_ = nullptr;
  int64_t moe_dropped_choices_ = 0;
  std::unique_ptr<ExpertBias> expert_bias_;  // router_bias only
  LayerParams local_layer_params(int64_t local_layer) const;
  // The microbatch's tokens b·s (b·s/cp per rank under cp, times the ring's cp).
  int64_t moe_aux_tokens() const { return lcfg_.tokens() * (lcfg_.cp_comm ? lcfg_.cp_comm->size() : 1); }
};

}  // namespace gpuledger
