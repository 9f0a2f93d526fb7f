// FinalizeGrads: what the training step does to the gradients between the
// schedule and the optimizer, beside the data-parallel sum (Megatron's
// finalize_model_grads and clip_grad_norm_fp32):
//   reduce_model_parallel — the model's TP-partial gradients (the
//     sequence-partial ones under --sp and the K/V rows of replicated KV
//     heads) summed over tp on the accumulated gradients
//     (StageModel::reduce_tp_partial_grads), for the units not summed during
//     the backward; then, tied embeddings with p > 1, the word embedding of
//     the first stage and the last stage's copy all-reduced over ctx.emb
//     (the tensors TensorSlot::summed_over_embedding_group), on the unit's
//     whole gradient: the accumulated one, or under ZeRO 2/3 with n > 1 the
//     unit's deferred full gradient (zero/grad_shards.h full_grad), before
//     its DP reduce-scatter;
//   grad_norm — the global gradient norm: Σ of squares of every gradient
//     element the rank holds summed over dp (under ZeRO 1/2/3 with n > 1 its
//     shard: ZeRO 1 reduce-scatters into it, ZeRO 2/3 keep only it), a tensor replicated
//     over TP (TensorSlot::replicated_over_tp) counted on TP rank 0 only, K/V
//     rows of a KV head replicated over t/k ranks (t > k) on the first of
//     them, the last stage's tied copy (TensorSlot::tied_copy) not at all;
//     the expert-sharded tensors (ep > 1) summed apart and, with clipping
//     on and ZeRO 0, all-reduced over ep first (under ZeRO >= 1 the rank's
//     shard of them, over the expert-data-parallel group, joins the dp sum);
//     with clipping on, the fp32 sum is all-reduced over dp when the
//     gradients are summed into shards, then over tp and pp (docs/formulas/comm.md
//     "Gradient clipping");
//   clip_coefficient — min(1, clip / (norm + 1e-6)) (Megatron's
//     clip_grad_norm_fp32; PyTorch's clip_grad_norm_), 1 without clipping.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "comm/comm.h"
#include "core/model_config.h"
#include "kernels/device.h"
#include "models/transformer/model.h"
#include "models/transformer/params.h"
#include "models/transformer/unit_shard.h"
#include "parallel/context/rank_context.h"

namespace gpuledger {

// One fp32 value summed over `comm` (a group of one returns it unchanged);
// staged through a 4-byte workspace buffer "scalar_reduce".
double all_reduce_scalar(Device& dev, Comm& comm, double v);

class FinalizeGrads {
 public:
  // tp_sum_after_schedule[u]: unit u's TP-partial gradients are summed by
  // reduce_model_parallel (not during the backward). The summed gradients are
  // the rank's shard over ctx.dp under ZeRO >= 1 with dp > 1 (stored whole
  // under ZeRO 1, as the shard alone when params.grads_sharded()).
  // full_grad (optional): the whole gradient of a unit whose gradients are
  // sharded, where the embedding-group sum applies (ZeroGradShards::full_grad).
  using FullGrad = std::function<void*(size_t unit)>;
  FinalizeGrads(Device& dev, const RankContext& ctx, const ModelConfig& model, StageModel& stage, Params& params,
                std::vector<bool> tp_sum_after_schedule, FullGrad full_grad = {});

  // Whether reduce_model_parallel sums over the embedding group on this rank.
  bool syncs_embedding() const { return ctx_.emb != nullptr && !emb_tensors_.empty(); }
  void reduce_model_parallel();
  // The global norm; reduced over the model-parallel (and sharding) groups when `reduce`.
  double grad_norm(bool reduce);
  static float clip_coefficient(double norm, double clip);

 private:
  double unit_sum_squares(size_t u, bool expert);  // the expert-sharded tensors, or the others
  bool reduced_to_shard() const { return ctx_.layout.zero >= 1 && ctx_.layout.dp_cp() > 1; }

  Device& dev_;
  RankContext ctx_;
  StageModel& stage_;
  Params& params_;
  std::vector<bool> tp_sum_after_schedule_;
  FullGrad full_grad_;
  std::vector<UnitShard> grad_shards_;  // per unit: the elements whose gradient the rank holds
  int64_t kv_replicas_;                 // t/k ranks share each KV head when t > k, else 1
  struct UnitTensor {
    size_t unit;
    const TensorSlot* tensor;
  };
  std::vector<UnitTensor> emb_tensors_;  // summed over the embedding group
};

}  // namespace gpuledger
