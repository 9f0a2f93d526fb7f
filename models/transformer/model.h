// StageModel: the part of the transformer one pipeline stage runs, for one
// tensor-parallel rank — the embedding (first stage: word embedding, + learned
// positions for gpt, dropout), its contiguous layers, and on the last stage
// the final norm, the head GEMM into fp32 logits and the cross-entropy loss.
//
// Microbatches are slots: forward(slot) saves that microbatch's tensors
// (account activations, docs/exact-budget.md "Activations" and "Stage
// extras"), backward(slot) consumes them, so any number may be in flight
// (GPipe holds all m, 1F1B up to pp − stage).
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
// per-TP-rank RNG state); the hidden-sized masks are the same on every TP rank.
//
// Pipeline extension points (next issue): a non-first stage takes its input
// from `stage_input` (the received activation, copied into its saved layer
// input), a non-last stage writes its output to `stage_output` (the send
// buffer); backward takes `output_grad` there and writes `input_grad`.
// Vocabulary-parallel embedding and cross-entropy (t > 1 on the first or last
// stage) need Device ops that do not exist yet: the constructor refuses them.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/device.h"
#include "models/config.h"
#include "models/run_config.h"
#include "models/transformer/layer.h"
#include "models/transformer/params.h"
#include "parallel/comm/comm.h"
#include "parallel/layout.h"

namespace gpuledger {

inline constexpr uint64_t kSiteEmbedding = 0, kSiteAttnProbs = 1, kSiteAttnOut = 2, kSiteMlpOut = 3;

class StageModel {
 public:
  StageModel(Device& device, Comm& tp, const ModelConfig& model, const RunConfig& run,
             const Layout& layout, const Coords& coords, Params& params);
  ~StageModel();

  // Forward of one microbatch into `slot`. First stage: ids (b × s, host);
  // last stage: targets (b × s, host). Returns the sum of the token losses on
  // the last stage (read back to the host), 0 elsewhere.
  double forward(int64_t slot, int64_t step, int64_t sample_offset, const int32_t* host_ids,
                 const int32_t* host_targets, const void* stage_input = nullptr,
                 void* stage_output = nullptr);
  // Backward of the microbatch in `slot`; frees its saved tensors.
  void backward(int64_t slot, float loss_scale, const void* output_grad = nullptr,
                void* input_grad = nullptr);

  // Drops the saved tensors of `slot` without a backward (evaluation only).
  void discard(int64_t slot);

  int64_t in_flight() const;  // slots holding a forward's saved tensors
  const LayerConfig& layer_config() const { return lcfg_; }

 private:
  struct Slot;
  LayerKeys keys(int64_t step, int64_t sample_offset, int64_t layer) const;
  RngKey key(int64_t step, int64_t sample_offset, int64_t layer, uint64_t site) const;
  void norm_forward(void* out, float* stats, const void* x, const void* w, const void* b);
  double head_forward(Slot& s, const int32_t* host_targets);
  void head_backward(Slot& s, float loss_scale, void* dres);

  Device& dev_;
  Comm& tp_;
  ModelConfig model_;
  RunConfig run_;
  Params& params_;
  LayerConfig lcfg_;
  bool first_, last_;
  int64_t tp_size_;
  std::vector<std::unique_ptr<TransformerLayer>> layers_;
  std::vector<std::unique_ptr<Slot>> slots_;
};

}  // namespace gpuledger
