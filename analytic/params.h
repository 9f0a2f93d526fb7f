// Parameter counts, tensor by tensor, from the model config alone
// (docs/exact-budget.md "Parameters held by a rank"). Analytic side: never
// reads kernels/ or models/transformer/.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/layout.h"
#include "core/model_config.h"

namespace gpuledger::analytic {

// V' = V if tp == 1, else ceil(V / (128·tp))·128·tp (Megatron).
int64_t padded_vocab(const ModelConfig& m, int64_t tp);

// Published total Ψ: t = 1, unpadded vocab, a tied matrix counted once.
int64_t model_params(const ModelConfig& m);
// The parameters one token passes through (docs/formulas/moe.md): Ψ less the
// E − k routed experts it is not sent to, in every layer. Ψ for a dense model.
int64_t active_params(const ModelConfig& m);
// Ψ without the embedding/head matrices and positions (the "non-embedding" N of Kaplan et al.).
int64_t non_embedding_params(const ModelConfig& m);
// One layer's parameters on one TP rank (and, with ep > 1, one expert-parallel rank: E/ep experts):
// layer_params the last layer (a MoE model's sparse layer), layer_params_at global layer `layer`
// (the first dense_layers layers of a MoE model hold the dense MLP).
int64_t layer_params(const ModelConfig& m, int64_t tp, int64_t ep = 1);
int64_t layer_params_at(const ModelConfig& m, int64_t layer, int64_t tp, int64_t ep = 1);
// The multi-token prediction modules (mtp_modules; DeepSeek-V3 §2.2), not in Ψ:
// per module one MoE layer, the two RMSNorms on its inputs, the 2h → h
// projection and the shared head's RMSNorm; its embedding and output head are
// the main model's and not counted again.
int64_t mtp_params(const ModelConfig& m);
// The largest single layer's parameters at t = 1 (DeepSpeed's ZeRO-3 estimator).
int64_t largest_layer_params(const ModelConfig& m);

// One named tensor of a unit (for tables and tests).
struct ParamTensor {
  std::string name;  // "layers.3.qkv.weight", "embedding.word", ...
  int64_t elems = 0;
  // ep > 1: the routed experts' matrices, E/ep experts on the rank, whose
  // gradients are summed over the expert-data-parallel group (dp/ep ranks)
  // rather than dp (Megatron-LM's expert parameters, allreduce = False).
  bool expert_sharded = false;
};

// A shardable unit: "embedding", "layer.<i>" (global layer index), "head".
// chunk: the model chunk whose passes run it (0 unless vpp > 1: the
// embedding in chunk 0, the head in chunk vpp − 1).
struct ParamUnit {
  std::string name;
  std::vector<ParamTensor> tensors;
  int64_t chunk = 0;
  int64_t elems() const;
  int64_t expert_sharded_elems() const;  // Σ of the expert_sharded tensors
  // ZeRO's shard of the unit (docs/exact-budget.md "Model states"): one part
  // of P_u elements over dp (the dp·cp ranks under context parallelism), or under ep > 1 the expert-sharded part X_u
  // over the expert-data-parallel group of dp/ep ranks and the rest over dp, each part padded to a multiple of its
  // group:
  //   shard  S_u = ⌈(P_u − X_u)/dp⌉ + ⌈X_u/(dp/ep)⌉
  //   padded     = dp·⌈(P_u − X_u)/dp⌉ + (dp/ep)·⌈X_u/(dp/ep)⌉
  int64_t shard_elems(const Layout& l) const;
  int64_t padded_elems(const Layout& l) const;
};

// Tied embeddings with p > 1 under ZeRO 2/3 and n > 1: the unit holding the
// word embedding or its copy (the first stage's "embedding", the last stage's
// "head") keeps its whole gradient, g·n·⌈P_u/n⌉ bytes (account grads), from
// its first backward of the step until after the schedule, when its word
// slot is summed over the embedding group and then reduce-scattered over dp,
// once per step (docs/exact-budget.md "Model states", docs/formulas/comm.md).
bool unit_reduced_after_schedule(const ModelConfig& m, const Layout& l, const ParamUnit& u);

// The units held by `rank` under `layout`, in forward order.
std::vector<ParamUnit> rank_param_units(const ModelConfig& m, const Layout& l, int64_t rank);
int64_t rank_params(const ModelConfig& m, const Layout& l, int64_t rank);        // P_r
int64_t rank_shard_params(const ModelConfig& m, const Layout& l, int64_t rank);  // S_r = Σ_u S_u

}  // namespace gpuledger::analytic
