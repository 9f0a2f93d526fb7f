// Tensor-parallel communication overlapped with the GEMMs beside it, as
// Megatron-Core's --tp-comm-overlap runs it (Transformer Engine userbuffers;
// Megatron-LM at tag core_r0.8.0, baf94af3c667,
// megatron/core/model_parallel_config.py: tp_comm_overlap_ag and
// tp_comm_overlap_rs "pipelining the GEMM and All-Gather / Reduce-Scatter",
// tp_comm_bulk_wgrad and tp_comm_bulk_dgrad overlapping the backward's
// all-gather and reduce-scatter with the dgrad and wgrad GEMMs). Megatron
// refuses the flag without sequence parallelism (megatron/training/
// arguments.py at the same tag), so the collectives are SP's all-gathers and
// reduce-scatters; an all-reduce stays blocking.
//
// The recorded program waits for every TP collective (the step code's own
// order: gather → GEMM, GEMM → reduce-scatter). This pass rewrites it:
//   - an all-gather followed, after element-wise ops only, by a GEMM: the
//     element-wise ops first, then the first of tp chunks of the gather on the
//     compute stream (the first GEMM chunk needs it), the other tp − 1 chunks
//     started on the TP stream beside the GEMM, and a wait after the GEMM;
//   - a reduce-scatter right after a GEMM: tp − 1 chunks started before the
//     GEMM (each chunk's reduction follows its GEMM chunk) and waited for after
//     it, then the last chunk on the compute stream.
// So a collective of t seconds beside a GEMM of g seconds costs
// t/tp + max(g, t·(tp − 1)/tp) instead of t + g — the ring exchange split into
// tp chunks (TE's pipelined overlap). A run of GEMMs merged into one event
// (dgrad then wgrad) hides the collective as a whole, as the bulk overlap of
// the backward does. What it leaves out: the SMs the userbuffer kernels take
// from the GEMM (it errs fast there).
#pragma once
#include <cstdint>
#include <vector>

#include "perf/sim/timeline.h"

namespace gpuledger::perf {

// Rewrites `program` (one rank's) for TP groups of `tp` ranks on the stream
// "comm tp"; tp ≤ 1 leaves it as it is. The new starts take handles above any
// in the program.
void overlap_tp_comm(std::vector<SimEvent>& program, int64_t tp);

}  // namespace gpuledger::perf
