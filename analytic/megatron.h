// Megatron-LM's own figures, as its current code computes them (NVIDIA/Megatron-LM
// at commit d98e8a64ddf34856e74b24714e3bedb2f5a39553, 2026-08-22):
//   megatron/training/theoretical_memory_usage.py
//     compute_weight_and_optimizer_memory (last changed in 1bcb3b9e),
//     compute_activation_memory, compute_activation_memory_without_sp and the
//     choice between them in report_theoretical_memory;
//   megatron/training/training.py num_floating_point_operations
//     (transformer_flops, dense layers, BSHD defaults).
// Dense models and MoE models whose every layer is a MoE layer (Megatron's
// --moe-layer-freq 1): compute_weight_and_optimizer_memory's routed experts
// (2·h·f_e·E·3/2 per layer, expert-sharded over ETP·EP and their optimizer
// state over the expert data-parallel size world/(ETP·EP·PP)), shared experts
// (2·h·S·f_s·3/2, TP-sharded) and router (h·E, replicated). No MTP, MLA,
// latent MoE, shared-expert gate or linear attention: those terms are zero
// here; Qwen3's QK norm (2·d per layer) is not in Megatron's count. The
// activation and FLOPs figures are the dense ones (Megatron's
// compute_activation_memory has no MoE term). Parameter counts follow Megatron's conventions
// (no linear biases, norm_size 1 for RMSNorm and 2 for LayerNorm, learned
// positions not counted, the vocabulary padded by vocab_size_with_padding).
#pragma once
#include <cstdint>
#include <optional>

#include "core/layout.h"
#include "core/model_config.h"
#include "core/run_config.h"

namespace gpuledger::analytic {

// The commit every source string below names.
inline constexpr const char* kMegatronCommit = "d98e8a64";

// megatron/core/tokenizers/utils/build_tokenizer.py vocab_size_with_padding:
// V rounded up to a multiple of make_vocab_size_divisible_by (128) × t — at
// t = 1 too (this implementation pads only when t > 1).
int64_t megatron_padded_vocab(int64_t vocab, int64_t tp);

// compute_weight_and_optimizer_memory, split as Megatron splits it: the
// TP-sharded parameters and the replicated ones (the norms) of the most loaded
// shard (stage 0) or of an other shard (stage > 0).
struct MegatronShardParams {
  double tp_sharded = 0;
  double replicated = 0;
  double expert_sharded = 0;  // routed experts, over ETP·EP (MoE)
  double total() const { return tp_sharded + replicated + expert_sharded; }
};
// Megatron's expert layout: --expert-model-parallel-size (EP, default 1) and
// --expert-tensor-parallel-size (ETP; megatron/training/arguments.py sets it
// to the TP size when not given).
struct MegatronExpertLayout {
  int64_t ep = 1;
  std::optional<int64_t> etp;
  int64_t etp_or(int64_t tp) const { return etp.value_or(tp); }
};
MegatronShardParams megatron_shard_params(const ModelConfig& m, const Layout& l, int64_t stage,
                                          const MegatronExpertLayout& x = {});
// Bytes per parameter: 18, or 6 + 12/DP with --use-distributed-optimizer.
double megatron_bytes_per_param(bool distributed_optimizer, int64_t dp);
// compute_weight_and_optimizer_memory's figure for the shard of `stage`:
// (TP-sharded + replicated) · bytes_per_param(DP) + expert-sharded ·
// bytes_per_param(expert DP = world / (ETP·EP·PP)), world = DP·TP·PP.
// (Megatron returns the most loaded shard's; stage > 0 gives the other shards'.)
double megatron_weight_and_optimizer_bytes(const ModelConfig& m, const Layout& l, int64_t stage,
                                           bool distributed_optimizer, const MegatronExpertLayout& x = {});

// report_theoretical_memory's activation figure (bytes) for the first pipeline
// stage: compute_activation_memory when sequence parallelism and selective
// recompute are both on, compute_activation_memory_without_sp otherwise.
// virtual_stages: Megatron's --num-layers-per-virtual-pipeline-stage derived
// count (None: no interleaving); microbatches: num_microbatches (None allowed).
struct MegatronActivationArgs {
  bool sequence_parallel = false;
  bool selective_recompute = false;
  std::optional<int64_t> virtual_stages;
  std::optional<int64_t> microbatches;
};
double megatron_activation_bytes(const ModelConfig& m, const Layout& l, const RunConfig& r,
                                 const MegatronActivationArgs& a);
// The arguments that describe this run (SP only with t > 1; no interleaving).
MegatronActivationArgs megatron_activation_args(const Layout& l, const RunConfig& r);

// num_floating_point_operations(args, batch_size) for one global batch
// (GQA- and SwiGLU-aware, causal halving of the core attention, padded vocabulary).
double megatron_step_flops(const ModelConfig& m, const Layout& l, const RunConfig& r);

}  // namespace gpuledger::analytic
