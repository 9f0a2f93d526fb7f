// Communication per rank per step, by collective and group, for this design
// (the groups, their sizes and the bus-bandwidth factors: core/collective.h).
// Bytes are counted as nccl-tests sizes a call: all-reduce the buffer,
// reduce-scatter its input, all-gather its output, send/recv the message.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "core/layout.h"
#include "core/model_config.h"
#include "core/run_config.h"

namespace gpuledger::analytic {

struct CommCount {
  int64_t calls = 0;
  int64_t bytes = 0;
};

// Key: "<kind>@<group>", kind in all_reduce reduce_scatter all_gather all_to_all
// broadcast send recv; group in dp tp pp cp emb (the tied-embedding group) ep; with
// cp > 1 "dp" is the data-parallel group with cp (dp·cp ranks). Only non-zero
// entries; a group of one rank issues nothing. The full rules, with a worked
// example, are docs/formulas/comm.md; in short:
//   DP, ZeRO 0/1: all-reduce of every gradient bucket (g bytes per element),
//     once per step; ZeRO 1 then all-gathers the updated weights (e per
//     element, per unit).
//   ZeRO 2: reduce-scatter of each unit's gradient after every microbatch's
//     backward, all-gather of weights after the step.
//   ZeRO 3: all-gather of each unit before forward and before backward, every
//     microbatch, and the reduce-scatter of ZeRO 2 (1.5× the DP volume at m = 1);
//     tied embeddings with p = 1 add the embedding unit's all-gather for the
//     head's forward, and for its backward when the head's prefetch window
//     (--prefetch q) does not reach the embedding, every microbatch.
//   TP: per layer per microbatch 2 all-reduces of b·s·h·e forward and 2
//     backward (SP: 2 all-gathers + 2 reduce-scatters forward, 4 all-gathers +
//     2 reduce-scatters backward, the norm outputs being gathered again); full
//     recompute repeats the forward's; the vocab-parallel embedding and head;
//     the cross-entropy's 3 reductions of b·s fp32 values; under SP the
//     all-reduce of the sequence-partial gradients (norms, gpt's row-parallel
//     biases and positions).
//   CP: the ring attention's K/V blocks (forward cp − 1 sends of B_kv per layer
//     per microbatch; backward cp sends of 2·(cp − 1)·B_kv in all, K/V and
//     dK/dV), B_kv = 2·b·(s/cp)·k·d·e, and their receives; a selective or
//     full recompute repeats the forward's.
//   PP: one activation send and one gradient recv of b·s_l·h·e per microbatch per
//     downstream boundary (and the mirror upstream).
//   Tied embeddings, p > 1: one all-reduce of V'/t·h·g over emb per step;
//     under ZeRO 2/3 with dp > 1 before the word's unit's one reduce-scatter
//     of the step (unit_reduced_after_schedule), not one per microbatch.
//   grad_clip > 0: the norm's fp32 sum all-reduced over tp, pp (and dp under ZeRO 2/3).
//   The step's loss: one fp32 all-reduce over dp (n > 1) and one over pp (p > 1).
//   Expert parallelism (ep > 1, MoE): per MoE layer per microbatch 4 all-to-alls
//     of E·C·h·e over ep (analytic/moe.h moe_ep_all_to_all_bytes).
std::map<std::string, CommCount> rank_comm_per_step(const ModelConfig& m, const Layout& l, const RunConfig& r,
                                                    int64_t rank);

}  // namespace gpuledger::analytic
