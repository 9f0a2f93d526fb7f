// Layout: world = dp × tp × pp × cp, ZeRO stage and sequence parallelism; rank
// <-> coordinates and process groups as pure functions (Megatron's RankGenerator
// order "tp-cp-ep-dp-pp" without ep: tp fastest, then cp, then dp, then pp).
// No MPI here.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/checked_math.h"

namespace gpuledger {

struct Coords {
  int64_t dp = 0, tp = 0, pp = 0;
  int64_t cp = 0;  // context-parallel rank (last, so that {dp, tp, pp} initialisers keep their meaning)
  bool operator==(const Coords&) const = default;
};

// A layout or run that does not divide. Exit status 2 at the command line.
class LayoutError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Layout {
  int64_t dp = 1, tp = 1, pp = 1;
  int zero = 0;     // 0..3, over the DP group
  bool sp = false;  // sequence parallelism (requires tp > 1 to matter)
  // Virtual pipeline stages (model chunks) per pipeline rank, Megatron's
  // virtual_pipeline_model_parallel_size: with vpp > 1 rank r holds the
  // layers of virtual stages c·pp + r, c = 0 … vpp − 1, and trains them
  // under the interleaved 1F1B schedule (parallel/pp/schedule.h).
  int64_t vpp = 1;
  // Expert-parallel size: the MoE layers' experts are split over ep ranks,
  // carved out of the data-parallel group as Megatron-LM does (ep divides dp;
  // megatron/core/parallel_state.py initialize_model_parallel, expert rank
  // generator "tp-ep-dp-pp" at d98e8a64: ep consecutive dp ranks form an ep
  // group, and the dp/ep ranks holding the same experts the expert-data-parallel group).
  int64_t ep = 1;
  // Context parallelism (Megatron's context_parallel_size): the sequence of
  // every microbatch split over cp ranks, 2·cp chunks, rank r holding chunks
  // r and 2·cp − 1 − r (cp_token_chunks below).
  int64_t cp = 1;

  // Checked: a layout whose product does not fit throws OverflowError rather than wrapping.
  int64_t world() const { return checked_product({dp, tp, pp, cp}, "world = dp·tp·pp·cp"); }
  Coords coords(int64_t rank) const;  // rank = tp + tp_size·(cp + cp_size·(dp + dp_size·pp))
  int64_t rank(const Coords& c) const;
  // Ranks of the group `rank` belongs to, in group order.
  std::vector<int64_t> tp_group(int64_t rank) const;
  std::vector<int64_t> dp_group(int64_t rank) const;
  std::vector<int64_t> pp_group(int64_t rank) const;
  // The ep group: dp coordinates ⌊d/ep⌋·ep … ⌊d/ep⌋·ep + ep − 1 (same tp, pp).
  std::vector<int64_t> ep_group(int64_t rank) const;
  // The expert-data-parallel group: the dp/ep ranks of the dp group with the
  // same d mod ep (the same experts), over which expert gradients are summed.
  std::vector<int64_t> expert_dp_group(int64_t rank) const;
  // The context-parallel ring (cp ranks, cp coordinate 0 … cp − 1) and
  // Megatron's data-parallel group with cp (dp·cp ranks: every rank holding
  // the same parameters, over which gradients are averaged), in (dp, cp) order.
  std::vector<int64_t> cp_group(int64_t rank) const;
  std::vector<int64_t> dp_cp_group(int64_t rank) const;
  // The size of that group, dp·cp, and a rank's place in it (dp_cp_group's
  // order: dp·cp + cp). Gradients are averaged over it and ZeRO shards over
  // it: Megatron's distributed optimizer shards over
  // data_parallel_group_with_cp (megatron/core/distributed/
  // distributed_data_parallel.py at d98e8a64ddf34856e74b24714e3bedb2f5a39553).
  int64_t dp_cp() const { return checked_product({dp, cp}, "dp·cp"); }
  int64_t dp_cp_rank(const Coords& c) const { return c.dp * cp + c.cp; }
  bool is_first_stage(int64_t rank) const { return coords(rank).pp == 0; }
  bool is_last_stage(int64_t rank) const { return coords(rank).pp == pp - 1; }
};

struct ModelConfig;
struct RunConfig;

// Throws LayoutError saying what divides what: sizes >= 1, zero in 0..3,
// heads % tp, kv_heads % tp or tp % kv_heads (replication), ffn % tp,
// ep: divides dp and the model's experts, tp = 1 and vpp = 1 (not built with them),
// layers >= pp (>= 1 layer per stage), seq % tp under sp, seq <= max_seq for gpt,
// seq % (2·cp) under cp > 1 (with flash attention and a MoE model at ep 1: the
// combinations built so far), (seq/cp) % tp under sp with cp > 1.
void validate_layout(const Layout& l, const ModelConfig& m, const RunConfig& r);

// Layers held by pipeline stage `stage` (contiguous, layers / pp each; when pp
// does not divide layers the stages at the ends hold one fewer, Llama 3 style)
// and the index of its first layer.
// With vpp > 1 a stage's layers are not contiguous: use the chunk functions.
int64_t layers_on_stage(const ModelConfig& m, const Layout& l, int64_t stage);
int64_t first_layer_of_stage(const ModelConfig& m, const Layout& l, int64_t stage);

// Model chunks (vpp > 1; with vpp = 1 the one chunk is the stage): each holds
// L/(pp·vpp) layers, chunk c of stage r the layers of virtual stage c·pp + r,
// from layer (c·pp + r)·L/(pp·vpp) on.
int64_t layers_per_chunk(const ModelConfig& m, const Layout& l, int64_t stage);
int64_t first_layer_of_chunk(const ModelConfig& m, const Layout& l, int64_t stage, int64_t chunk);

// Causal load balancing of context parallelism (Megatron's get_batch_on_this_cp_rank, per sequence,
// megatron/core/utils.py at d98e8a64ddf34856e74b24714e3bedb2f5a39553; TE's ring attention assumes it):
// the sequence of s tokens is cut into 2·cp chunks of s/(2·cp) and cp rank r
// holds chunks r and 2·cp − 1 − r, in that order, so that every rank's queries
// see the same number of causal keys. Throws LayoutError unless 2·cp divides s.
struct CpChunks {
  int64_t first = 0, second = 0;  // chunk indices, first < second
  int64_t chunk_tokens = 0;       // s / (2·cp)
};
CpChunks cp_token_chunks(int64_t seq, int64_t cp, int64_t cp_rank);
// Global position of the rank's i-th local token, i in [0, s/cp).
int64_t cp_global_position(const CpChunks& c, int64_t i);
// The rank's tokens of `count` sequences of `seq` tokens (count × seq, row
// major) -> local (count × seq/cp): each sequence's chunks `first` and
// `second`, in that order (ids and targets alike).
void cp_local_tokens(const CpChunks& c, int64_t count, int64_t seq, const int32_t* tokens, int32_t* local);

// KV heads one TP rank holds (docs/exact-budget.md k_t): k/t when t <= k (t
// must divide k), else 1 — each KV head replicated t/k times (t a multiple of
// k). Throws std::invalid_argument when t does not split k either way.
int64_t kv_heads_on_rank(int64_t kv_heads, int64_t tp);

}  // namespace gpuledger
