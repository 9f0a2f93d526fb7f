// Communication per rank per step, by "<kind>@<group>", for this design, and
// the nccl-tests bus-bandwidth factors. The rules below are the contract the
// Comm counters of parallel/ are compared to; docs/formulas/comm.md states
// them with a worked example. Bytes per call are counted as nccl-tests sizes
// the buffer (doc/PERFORMANCE.md): all-reduce the buffer, reduce-scatter its
// input, all-gather its output, send/recv the message. Pure functions of the
// config, layout and run: never reads parallel/ or kernels/.
//
// General rules
//   - A group of one rank issues no call (ZeRO over dp = 1 is plain DP).
//   - e = bytes of --dtype; g = bytes of --grad-dtype (4 when --dtype fp32);
//     m microbatches per step; n = dp, t = tp, p = pp; s_l = s/t under --sp.
//   - The step's loss is reported by every rank (parallel/train_step.h
//     StepResult::loss): one fp32 all-reduce over dp (n > 1), then one over pp
//     (p > 1). Not counted: barriers and the report gather.
#include "analytic/comm_volume.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "analytic/dp_staging.h"
#include "analytic/mla.h"
#include "analytic/moe.h"
#include "analytic/offload.h"
#include "analytic/params.h"
#include "analytic/pipeline.h"
#include "core/checked_math.h"
#include "core/collective.h"
#include "core/int_math.h"

namespace gpuledger::analytic {
namespace {

// Accumulates calls and bytes per "<kind>@<group>"; zero entries never appear.
class Tally {
 public:
  // `calls` calls of `bytes_per_call` bytes each.
  void add(CommKind kind, CommGroup group, int64_t calls, int64_t bytes_per_call) {
    add_total(kind, group, calls, checked_mul(calls, bytes_per_call, "communication bytes"));
  }
  // `calls` calls moving `bytes` in all (buckets of unequal size).
  void add_total(CommKind kind, CommGroup group, int64_t calls, int64_t bytes) {
    if (calls <= 0 || bytes <= 0) return;
    CommCount& c = counts_[comm_key_name({kind, group})];
    c.calls = checked_add(c.calls, calls, "communication calls");
    c.bytes = checked_add(c.bytes, bytes, "communication bytes");
  }
  std::map<std::string, CommCount> take() { return std::move(counts_); }

 private:
  std::map<std::string, CommCount> counts_;
};

// The ranks that hold the same parameters and average their gradients: dp·cp
// (Megatron's data-parallel group with context parallelism, counted under "dp").
int64_t grad_ranks(const Layout& l) { return l.dp * l.cp; }

// ---- DP and ZeRO over the dp group (n > 1) ----
void dp_comm(Tally& tally, const ModelConfig& m, const std::vector<ParamUnit>& units, const Layout& l,
             const RunConfig& r, int64_t e, int64_t g) {
  const int64_t n = grad_ranks(l);
  if (n < 2) return;
  const int64_t mb = r.microbatches;
  if (l.zero == 0) {
    // ZeRO 0: after the last microbatch's backward, the rank's whole gradient
    // buffer (P_r elements of g bytes, units back to back) is all-reduced in
    // buckets of ⌊bucket_mb·2²⁰ / g⌋ elements: ⌈P_r / bucket⌉ calls, P_r·g bytes.
    // With ep > 1 the expert-sharded tensors (P_x of the P_r) are left out of
    // the dp buckets and summed over the expert-data-parallel group "edp"
    // (dp/ep ranks holding the same experts) in buckets of their own:
    // ⌈(P_r − P_x) / bucket⌉ calls over dp, ⌈P_x / bucket⌉ over edp (none
    // when dp = ep) — Megatron-LM's separate expert-parallel grad buffers
    // (megatron/core/distributed/distributed_data_parallel.py at
    // 001199898c4badd01eaf0785c212d8ed7ce83042: the expert-parallel
    // parameters' buffers reduced over expt_dp_group).
    const int64_t bucket = dp_bucket_elems(r.bucket_mb, g);
    int64_t p_r = 0, p_x = 0;
    for (const auto& u : units) {
      p_r = checked_add(p_r, u.elems(), "parameters of a rank");
      p_x = checked_add(p_x, u.expert_sharded_elems(), "expert parameters of a rank");
    }
    tally.add_total(CommKind::kAllReduce, CommGroup::kDp, ceil_div(p_r - p_x, bucket),
                    checked_mul(p_r - p_x, g, "communication bytes"));
    if (p_x > 0 && l.dp / l.ep > 1)
      tally.add_total(CommKind::kAllReduce, CommGroup::kEdp, ceil_div(p_x, bucket),
                      checked_mul(p_x, g, "communication bytes"));
  }
  // ZeRO >= 1 shards each unit in parts, each over its group
  // (docs/exact-budget.md "Model states"): the unit over dp, or under ep > 1
  // a MoE layer's expert-sharded part X_u over the expert-data-parallel group
  // "edp" (dp/ep ranks) and the rest over dp; a part over one rank needs no
  // collective. Below, per part of P elements over n_k ranks, padded to
  // n_k·⌈P/n_k⌉.
  struct Part {
    int64_t elems, n;
    CommGroup group;
    int64_t padded() const { return n * ceil_div(elems, n); }
  };
  auto parts_of = [&](const ParamUnit& u) {
    const int64_t x = u.expert_sharded_elems();
    std::vector<Part> ps;
    if (x > 0 && l.dp / l.ep > 1) ps.push_back({x, l.dp / l.ep, CommGroup::kEdp});
    ps.push_back({u.elems() - x, n, CommGroup::kDp});
    return ps;
  };
  if (l.zero == 1) {
    // ZeRO 1 (Rajbhandari et al. 2020 §5.1, P_os; Megatron's distributed
    // optimizer): after the last microbatch's backward each part's gradient is
    // reduce-scattered into the rank's shard of ⌈P/n⌉ elements, in pieces of
    // c = max(1, ⌊bucket/n⌋) shard elements — a piece gathers the same c
    // elements of every rank's shard, n·c elements: ⌈⌈P/n⌉ / c⌉ calls and
    // n·⌈P/n⌉·g bytes per part. With the all-gather below that is DP's
    // volume (2Ψ), not the 3Ψ of an all-reduce followed by an all-gather.
    for (const auto& u : units)
      for (const Part& p : parts_of(u)) {
        const int64_t piece = zero1_piece_elems(dp_bucket_elems(r.bucket_mb, g), p.n);
        tally.add_total(CommKind::kReduceScatter, p.group, ceil_div(ceil_div(p.elems, p.n), piece), p.padded() * g);
      }
  }
  for (const auto& u : units)
    for (const Part& p : parts_of(u)) {
      if (l.zero == 1 || l.zero == 2) {
        // ZeRO 1/2: the optimizer updates the shard; then each part's updated
        // weights (e bytes per element) are all-gathered into the full copy.
        tally.add(CommKind::kAllGather, p.group, 1, p.padded() * e);
      }
      if (l.zero >= 2) {
        // ZeRO 2/3: one unit's full gradient exists at a time (the staging buffer
        // of docs/exact-budget.md), so after every microbatch's backward of a
        // unit each part's gradient is reduce-scattered, accumulating into the
        // shard — but the tied word's unit (p > 1) once, after the schedule and
        // the embedding-group sum (unit_reduced_after_schedule).
        tally.add(CommKind::kReduceScatter, p.group, unit_reduced_after_schedule(m, l, u) ? 1 : mb, p.padded() * g);
      }
      if (l.zero == 3) {
        // ZeRO 3: a unit is gathered before its forward and again before its
        // backward, every microbatch (a full recompute runs on the backward's copy).
        tally.add(CommKind::kAllGather, p.group, 2 * mb, p.padded() * e);
      }
    }
  if (l.zero == 3 && m.tied_embeddings && l.pp == 1 && !units.empty()) {
    // ZeRO 3, tied, p = 1: the head reads the embedding unit's word matrix,
    // so the embedding unit (units[0]; the head is the last unit) is gathered
    // again for the head's forward, every microbatch (it was freed after its
    // own forward), and for the head's backward unless the head's backward
    // prefetch window, units head − q … head, already reaches it (head − q ≤ 0);
    // that copy is freed at the head's end (parallel/train_step.cpp).
    const int64_t head = static_cast<int64_t>(units.size()) - 1;
    const int64_t q = std::max<int64_t>(r.prefetch, 0);
    const int64_t padded = n * ceil_div(units.front().elems(), n);
    tally.add(CommKind::kAllGather, CommGroup::kDp, mb * (head - q > 0 ? 2 : 1), padded * e);
  }
}

// ---- TP (Megatron; t > 1), per microbatch unless stated ----
void tp_comm(Tally& tally, const ModelConfig& m, const Layout& l, const RunConfig& r, bool first, bool last,
             int64_t layers, int64_t e, int64_t g) {
  if (l.tp < 2) return;
  const int64_t mb = r.microbatches;
  // b·s·h·e: the full activation of the rank's tokens (s/cp under context parallelism)
  const int64_t s_r = r.seq / l.cp;
  const int64_t act = checked_product({r.mbs, s_r, m.hidden, e}, "TP message bytes");
  const bool full = r.recompute == Recompute::kFull;
  // Layers. No SP: forward all-reduces the outputs of attention-out and MLP-out
  // (row-parallel); backward all-reduces the input gradients of QKV and MLP-in
  // (column-parallel): 2 + 2. SP: forward all-gathers the two norm outputs and
  // reduce-scatters the two row-parallel outputs; backward all-gathers the two
  // output gradients, all-gathers the saved sharded norm outputs again (for the
  // weight gradients) and reduce-scatters the two input gradients: 6 AG + 4 RS.
  // A full recompute reruns the forward with its collectives (+2 AR; SP +2 AG
  // +2 RS); selective recompute has none.
  if (!l.sp) {
    tally.add(CommKind::kAllReduce, CommGroup::kTp, mb * layers * (full ? 6 : 4), act);
  } else {
    tally.add(CommKind::kAllGather, CommGroup::kTp, mb * layers * (full ? 8 : 6), act);
    tally.add(CommKind::kReduceScatter, CommGroup::kTp, mb * layers * (full ? 6 : 4), act);
  }
  if (first) {
    // Vocab-parallel embedding: each rank looks up its V'/t rows and the
    // partial outputs are summed: all-reduce (no SP; backward is the identity)
    // or reduce-scatter to sequence shards (SP; backward all-gathers).
    if (!l.sp) {
      tally.add(CommKind::kAllReduce, CommGroup::kTp, mb, act);
    } else {
      tally.add(CommKind::kReduceScatter, CommGroup::kTp, mb, act);
      tally.add(CommKind::kAllGather, CommGroup::kTp, mb, act);
    }
  }
  if (last) {
    // Head (column-parallel over the vocabulary). No SP: forward identity,
    // backward all-reduces the head input's gradient. SP: forward all-gathers
    // the final-norm output, backward gathers it again and reduce-scatters the
    // input gradient.
    if (!l.sp) {
      tally.add(CommKind::kAllReduce, CommGroup::kTp, mb, act);
    } else {
      tally.add(CommKind::kAllGather, CommGroup::kTp, 2 * mb, act);
      tally.add(CommKind::kReduceScatter, CommGroup::kTp, mb, act);
    }
    // Vocab-parallel cross-entropy (Megatron): all-reduces of the row max, the
    // target logit and the sum of exponentials, b·s fp32 values each; the
    // backward is local.
    tally.add(CommKind::kAllReduce, CommGroup::kTp, 3 * mb, checked_product({4, r.mbs, s_r}, "TP message bytes"));
  }
  if (l.sp) {
    // Sequence-partial gradients. Tensors replicated over TP whose gradient,
    // under SP, each TP rank computes from its sequence shard only — a partial
    // sum that must be all-reduced over tp for every layout to train the same
    // model: norm γ (and gpt's β: norms run on shards), gpt's row-parallel
    // biases (added after the reduce-scatter, on shards) and gpt's learned
    // positions (added to the shard after the embedding's reduce-scatter).
    // One all-reduce per tensor: once per step on the accumulated gradient
    // under ZeRO 0/1 (or n = 1); every microbatch, on the unit's staging
    // gradient before its reduce-scatter, under ZeRO 2/3 with n > 1.
    const int64_t times = (l.zero >= 2 && grad_ranks(l) > 1) ? mb : 1;
    const int64_t h_bytes = m.hidden * g;
    // per layer: gpt norm1 γ β, attn-out bias, norm2 γ β, MLP-out bias; llama norm1 γ, norm2 γ (and with
    // post_norms the two post-block norms' γ, with attn_out_bias the attention-out bias)
    const int64_t per_layer = m.is_gpt() ? 6 : 2 + (m.post_norms ? 2 : 0) + (m.attn_out_bias ? 1 : 0);
    tally.add(CommKind::kAllReduce, CommGroup::kTp, times * layers * per_layer, h_bytes);
    if (first && m.is_gpt()) tally.add(CommKind::kAllReduce, CommGroup::kTp, times, m.max_seq * h_bytes);
    if (last) tally.add(CommKind::kAllReduce, CommGroup::kTp, times * (m.is_gpt() ? 2 : 1), h_bytes);  // final norm
  }
  if (l.tp > m.kv_heads) {
    // Replicated KV heads (t > k; each KV head on t/k ranks): a replica's K and
    // V weight (and bias) gradients cover only its own rank's queries, so they
    // are summed over the ranks sharing the head. With no sub-group of those
    // ranks, one all-reduce over tp per layer of a staging buffer with a slot
    // per KV head — k·2·d·(h + 1 if qkv_bias) elements of g — the rank's slot
    // filled, the rest zero. With or without SP; when, as for the
    // sequence-partial gradients.
    const int64_t times = (l.zero >= 2 && grad_ranks(l) > 1) ? mb : 1;
    const bool bias = m.is_gpt() || m.qkv_bias;
    const int64_t slot = 2 * m.head_dim * (m.hidden + (bias ? 1 : 0));
    tally.add(CommKind::kAllReduce, CommGroup::kTp, times * layers, m.kv_heads * slot * g);
  }
  if (m.is_mla()) {
    // Multi-head latent attention's down projections and latent norms: whole
    // on every rank, their gradients partial sums over the ranks' heads
    // (docs/formulas/mla.md "Training"), one all-reduce over tp each per
    // layer, with or without SP (then in place of the sequence-partial one);
    // when, as for the sequence-partial gradients.
    const int64_t times = (l.zero >= 2 && grad_ranks(l) > 1) ? mb : 1;
    for (const int64_t elems : mla_tp_partial_grad_elems(m))
      tally.add(CommKind::kAllReduce, CommGroup::kTp, times * layers, checked_mul(elems, g, "TP message bytes"));
  }
}

// ---- PP (p > 1): point-to-point between neighbouring stages ----
void pp_comm(Tally& tally, const ModelConfig& m, const Layout& l, const RunConfig& r, bool first, bool last) {
  if (l.pp < 2) return;
  const int64_t mb = r.microbatches;
  const int64_t msg = pipeline_message_bytes(m, l, r);  // b·s_l·h·e, s_l = s/cp (/t under sp)
  // Per microbatch and model chunk: toward the next virtual stage send the
  // activation, receive its gradient; toward the previous one receive the
  // activation, send the gradient — every chunk but the very last (the head's:
  // chunk vpp − 1 of the last stage) has a next, every chunk but the very
  // first (the embedding's: chunk 0 of the first stage) a previous. With vpp
  // chunks that is vpp times the messages of one chunk, less the ends. A full
  // recompute adds none (the layer input is kept).
  const int64_t with_next = l.vpp - (last ? 1 : 0), with_prev = l.vpp - (first ? 1 : 0);
  if (with_next > 0) {
    tally.add(CommKind::kSend, CommGroup::kPp, mb * with_next, msg);
    tally.add(CommKind::kRecv, CommGroup::kPp, mb * with_next, msg);
  }
  if (with_prev > 0) {
    tally.add(CommKind::kRecv, CommGroup::kPp, mb * with_prev, msg);
    tally.add(CommKind::kSend, CommGroup::kPp, mb * with_prev, msg);
  }
}

// ---- CP (cp > 1): the ring attention's point-to-point ----
// Per layer per microbatch, one K/V block of the rank's s/cp tokens is
// B_kv = 2·b·(s/cp)·k·d·e bytes (K and V; tp = 1). As TransformerEngine's
// AttnFuncWithCPAndKVP2P does it (transformer_engine/pytorch/attention/
// dot_product_attention/context_parallel.py at d0067d0da6cb01811b8072a7d304f0e00344ce2b):
//   forward: cp − 1 ring steps, each sends the block the rank holds to the next
//     rank and receives the previous rank's (p2p_comm_buffers[i] -> [i + 1]);
//   backward: cp iterations, each one send and one recv: the first sends the
//     K/V block only, the last the dK/dV partial sum only (it reaches its
//     owner), the cp − 2 between both in one buffer — cp messages of
//     2·(cp − 1)·B_kv bytes in all.
// A selective recompute re-runs the attention core's forward in the backward,
// a full recompute the layer's: either repeats the forward's ring.
void cp_comm(Tally& tally, const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t layers, int64_t e) {
  if (l.cp < 2) return;
  const int64_t block = checked_product({2, r.mbs, r.seq / l.cp, kv_heads_on_rank(m.kv_heads, l.tp), m.head_dim, e},
                                        "ring K/V block bytes");
  const int64_t units = checked_mul(r.microbatches, layers, "ring layer passes");
  const int64_t forwards = r.recompute == Recompute::kNone ? 1 : 2;
  for (const CommKind kind : {CommKind::kSend, CommKind::kRecv}) {
    tally.add(kind, CommGroup::kCp, checked_product({units, forwards, l.cp - 1}, "ring messages"), block);
    tally.add_total(kind, CommGroup::kCp, checked_mul(units, l.cp, "ring messages"),
                    checked_product({units, 2 * (l.cp - 1), block}, "ring bytes"));
  }
}

}  // namespace

std::map<std::string, CommCount> rank_comm_per_step(const ModelConfig& m, const Layout& l, const RunConfig& r,
                                                    int64_t rank) {
  const Coords c = l.coords(rank);
  const bool first = c.pp == 0, last = c.pp == l.pp - 1;
  const int64_t e = dtype_bytes(r.dtype);
  const int64_t g = r.dtype == DType::kFP32 ? 4 : dtype_bytes(r.grad_dtype);
  const auto units = rank_param_units(m, l, rank);
  Tally tally;

  dp_comm(tally, m, units, l, r, e, g);
  tp_comm(tally, m, l, r, first, last, layers_on_stage(m, l, c.pp), e, g);
  pp_comm(tally, m, l, r, first, last);
  cp_comm(tally, m, l, r, layers_on_stage(m, l, c.pp), e);

  // --offload optimizer: per unit, the gradient shard device→host and the
  // updated weights host→device (analytic/offload.h); copies, not collectives,
  // counted beside them under the group "host".
  const OffloadTraffic off = offload_traffic(m, l, r, rank);
  tally.add_total(CommKind::kCopyToHost, CommGroup::kHost, off.copies, off.grad_bytes_to_host);
  tally.add_total(CommKind::kCopyToDevice, CommGroup::kHost, off.copies, off.param_bytes_to_device);

  // Tied embeddings with p > 1: the first stage's word embedding and the last
  // stage's copy are one parameter; after the last microbatch their gradients
  // (V'/t·h elements) are all-reduced over the 2-rank "emb" group (Megatron's
  // embedding group), once per step — under ZeRO 2/3 (n > 1) on the unit's
  // whole gradient before its DP reduce-scatter.
  if (m.tied_embeddings && l.pp > 1 && (first || last)) {
    tally.add(CommKind::kAllReduce, CommGroup::kEmb, 1, padded_vocab(m, l.tp) / l.tp * m.hidden * g);
  }

  // Gradient clipping (grad_clip > 0): the global norm's sum of squares, one
  // fp32, all-reduced once per step over every group that splits the model's
  // gradients: tp (t > 1), pp (p > 1), and dp when ZeRO 1/2/3 sum the
  // gradients into shards (each rank's norm covers its shard).
  if (r.grad_clip > 0) {
    if (l.zero >= 1 && grad_ranks(l) > 1) tally.add(CommKind::kAllReduce, CommGroup::kDp, 1, 4);
    if (l.tp > 1) tally.add(CommKind::kAllReduce, CommGroup::kTp, 1, 4);
    if (l.pp > 1) tally.add(CommKind::kAllReduce, CommGroup::kPp, 1, 4);
    // ep > 1, ZeRO 0: each rank of an ep group holds other experts, so the
    // experts' share of the sum of squares is all-reduced over ep (one fp32);
    // under ZeRO >= 1 each rank holds a shard of them and the dp sum above
    // covers every shard once.
    if (m.is_moe() && l.ep > 1 && l.zero == 0) tally.add(CommKind::kAllReduce, CommGroup::kEp, 1, 4);
  }

  // Expert parallelism (ep > 1; docs/formulas/moe.md "Expert parallelism",
  // models/moe/moe_block.h): every MoE layer of the rank, every microbatch,
  // exchanges its E·C capacity slots (C per expert per source rank, from the
  // microbatch's b·s tokens) four times over ep: dispatch and combine in the
  // forward, their gradients in the backward; E·C·h·e bytes per call
  // (analytic/moe.h). Under --recompute full the backward re-runs each
  // layer's forward, its dispatch and combine included: two more per block
  // and microbatch. The expert gradients' sum over the expert-data-parallel
  // group is in dp_comm above.
  // A MoE model's first dense_layers hold the dense MLP and exchange nothing.
  if (m.is_moe() && l.ep > 1 && moe_layers_on_stage(m, l, c.pp) > 0) {
    const int64_t per_block = kMoeEpAllToAllsPerBlockStep + (r.recompute == Recompute::kFull ? 2 : 0);
    const int64_t calls =
        checked_product({per_block, r.microbatches, moe_layers_on_stage(m, l, c.pp)}, "communication calls");
    tally.add(CommKind::kAllToAll, CommGroup::kEp, calls,
              moe_ep_all_to_all_bytes(m, checked_mul(r.mbs, r.seq, "tokens"), e));
  }

  // Context parallelism with MoE layers: each block's f_e counts (E fp32)
  // all-reduced over cp in every forward (models/moe/moe_block.h), the
  // recompute's re-run forward included, for the load-balancing loss over the
  // microbatch's b·s tokens (Megatron-LM get_tokens_per_expert_and_token_count
  // over the tp·cp group, moe_utils.py at d98e8a64ddf34856e74b24714e3bedb2f5a39553).
  if (m.is_moe() && l.cp > 1 && moe_layers_on_stage(m, l, c.pp) > 0) {
    const int64_t forwards = r.recompute == Recompute::kFull ? 2 : 1;
    tally.add(CommKind::kAllReduce, CommGroup::kCp,
              checked_product({forwards, r.microbatches, moe_layers_on_stage(m, l, c.pp)}, "communication calls"),
              4 * m.num_experts);
  }

  // DeepSeek-V3's expert bias: the stage's MoE layers' load counts (E fp32
  // each, stacked) all-reduced over dp·cp once per step before the bias
  // update (Megatron-LM finalize_model_grads.py _update_router_expert_bias,
  // moe_utils.py get_updated_expert_bias, at d98e8a64ddf34856e74b24714e3bedb2f5a39553).
  if (router_bias_bytes(m, l, c.pp) > 0 && grad_ranks(l) > 1)
    tally.add(CommKind::kAllReduce, CommGroup::kDp, 1, router_bias_bytes(m, l, c.pp));

  // The loss of the global batch on every rank: each last-stage rank's share
  // (its token losses / global tokens, one fp32) summed over dp, then over pp
  // (the other stages add 0). TP ranks compute the same loss (vocab-parallel
  // cross-entropy), so tp needs none.
  if (grad_ranks(l) > 1) tally.add(CommKind::kAllReduce, CommGroup::kDp, 1, 4);
  if (l.pp > 1) tally.add(CommKind::kAllReduce, CommGroup::kPp, 1, 4);
  return tally.take();
}

}  // namespace gpuledger::analytic
