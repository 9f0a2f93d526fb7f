// The mixture-of-experts terms of the budgets (docs/formulas/moe.md), from
// the model config alone; the measured block is models/moe/moe_block.h. The
// parameters (total and active) are in analytic/params.h.
//
// Rows: an expert's capacity is C = ⌈c·N·k/E⌉ (no capacity factor: N); the
// rows the experts process, A, are N·k less the dropped choices. A is known
// after routing; before it the prediction is the capacity-bound worst case
// A_max = min(N·k, E·min(C, N)): every expert full to its capacity, and never
// more than the N·k choices there are.
#pragma once
#include <cstdint>

#include "core/layout.h"
#include "core/model_config.h"

namespace gpuledger::analytic {

int64_t moe_capacity(const ModelConfig& m, int64_t tokens);  // C

// The MoE layers among those `stage` holds (every chunk under vpp): all of
// them, less DeepSeek's first dense_layers (HF first_k_dense_replace), which
// hold the dense MLP of size ffn. 0 for a dense model.
int64_t moe_layers_on_stage(const ModelConfig& m, const Layout& l, int64_t stage);
int64_t moe_worst_case_rows(const ModelConfig& m, int64_t tokens);  // A_max

// DeepSeek-V3's expert bias (router_bias; docs/formulas/moe.md "The expert
// bias"): per MoE layer of the stage E fp32 values, held on every rank as a
// buffer beside the weights (Megatron-LM's TopKRouter register_buffer
// 'expert_bias', fp32), not trained: 4·E·(MoE layers of the stage) bytes,
// account weights. After each step the load counts of those layers (the same
// 4·E·layers bytes) are all-reduced over the data-parallel group with cp
// (Megatron's tp·dp·cp group at tp = 1), one call; 0 without a bias.
int64_t router_bias_bytes(const ModelConfig& m, const Layout& l, int64_t stage);

// The bytes one MoE block saves for its backward, N tokens, A kept rows,
// activations of e bytes: probabilities N·E·4, the row → token table A·4, the
// gathered input and the expert output 2·A·h·e, gate, up and SwiGLU output
// 3·A·f_e·e, the shared experts' gate, up and output 3·N·S·f_s·e.
int64_t moe_block_activation_bytes(const ModelConfig& m, int64_t tokens, int64_t rows, int64_t e_bytes);

// Expert parallelism over ep ranks (docs/formulas/moe.md "Expert
// parallelism"; the block is models/moe/moe_block.h): every rank exchanges
// fixed-size buffers of E·C slots (C per expert per source rank, from its own
// N tokens), so a rank's experts process E/ep experts × ep sources × C slots =
// E·C rows, padding included, whatever the routing: the bytes, FLOPs and
// all-to-all volume below are known before the run.
int64_t moe_ep_slots(const ModelConfig& m, int64_t tokens);  // E·C
// Whether the training block works on the E·C slots: under ep > 1, and on
// one rank when the model has a capacity factor (the block pads to capacity,
// Megatron-LM's --moe-pad-expert-input-to-capacity), so that the bytes and
// FLOPs are exact whatever the routing drops.
bool moe_padded_to_capacity(const ModelConfig& m, const Layout& l);
// Saved per block under ep: probabilities N·E·4, the received rows and the
// returned expert outputs 2·E·C·h·e, gate, up and SwiGLU output 3·E·C·f_e·e,
// the shared experts 3·N·S·f_s·e (no row → token table: the host plan maps slots).
int64_t moe_block_ep_activation_bytes(const ModelConfig& m, int64_t tokens, int64_t e_bytes);
// The bytes one of the block's all-to-alls books (the send buffer, nccl-tests
// sizing): E·C·h·e; a block issues 2 per forward and 2 per backward.
int64_t moe_ep_all_to_all_bytes(const ModelConfig& m, int64_t tokens, int64_t e_bytes);
constexpr int64_t kMoeEpAllToAllsPerBlockStep = 4;

// The GEMM FLOPs of one MoE block's forward over N tokens with A kept rows:
// router 2·N·h·E, experts 3·2·A·h·f_e, shared experts 3·2·N·h·S·f_s. The
// backward is twice the forward (each GEMM has a data and a weight GEMM).
// Under ep a rank's experts run A = moe_ep_slots rows.
int64_t moe_block_forward_flops(const ModelConfig& m, int64_t tokens, int64_t rows);

// Model FLOPs per token of training, 6·N_active (Kaplan et al. 2020 §2.1
// with the active parameters; attention scores left out), N_active =
// analytic::active_params less the input embedding lookup (kept when tied:
// the matrix is then also the head's GEMM).
int64_t moe_training_flops_per_token(const ModelConfig& m);

}  // namespace gpuledger::analytic
