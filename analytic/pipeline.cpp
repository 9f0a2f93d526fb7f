// Pipeline closed forms: microbatches in flight on a stage at its activation
// peak, and the bubble. Written from the schedules' definitions, not from
// parallel/pp/schedule (a test compares the two).
#include "analytic/pipeline.h"

#include <algorithm>

#include "core/checked_math.h"

namespace gpuledger::analytic {

int64_t microbatches_in_flight(Schedule s, int64_t pp, int64_t stage, int64_t m) {
  // GPipe (Huang et al. 2019): all m forwards run before the first backward,
  // so every stage holds m microbatches' activations at its peak.
  if (s == Schedule::kGPipe) return m;
  // 1F1B (PipeDream-Flush; Narayanan et al. 2021 §2.2): stage i runs
  // p − i − 1 warm-up forwards, then one more forward before its first
  // backward: p − i in flight, or all m when there are fewer microbatches.
  // This is what makes the first stage hold L layers' worth (Korthikanti et al.
  // 2022 §4.2.3).
  return std::min(pp - stage, m);
}

double bubble_fraction(int64_t pp, int64_t m, int64_t vpp) {
  // Narayanan et al. 2021 §2.2.1: bubble time / ideal time = (p − 1) / m, i.e.
  // (p − 1) / (m + p − 1) of the whole step (same for GPipe and 1F1B).
  // Interleaved: bubble / ideal = (p − 1)/(v·m) (bubble_over_ideal), so
  // (p − 1)/(v·m + p − 1) of the step.
  return static_cast<double>(pp - 1) / static_cast<double>(vpp * m + pp - 1);
}

int64_t chunk_microbatches_in_flight(int64_t pp, int64_t stage, int64_t m, int64_t vpp) {
  // Megatron-LM's get_pp_rank_microbatches (megatron/core/pipeline_parallel/
  // schedules.py at d98e8a64ddf34856e74b24714e3bedb2f5a39553): the interleaved
  // schedule runs (pp − rank − 1)·2 + (vpp − 1)·pp warm-up forwards (for
  // vpp = 1 the non-interleaved pp − rank − 1), then one forward more before
  // its first backward; nothing is released before that backward, and from
  // then on every forward is followed by a backward.
  const int64_t total = m * vpp;
  const int64_t warmup = vpp == 1 ? pp - stage - 1 : (pp - stage - 1) * 2 + (vpp - 1) * pp;
  // On the first stage (stage 0, m >= pp) that is pp·(vpp + 1) − 1 chunks of
  // L/(pp·vpp) layers: L·(1 + (pp − 1)/(pp·vpp)) layers' worth, Megatron's
  // interleaved_schedule_memory_penalty (megatron/training/
  // theoretical_memory_usage.py at the same commit).
  return std::min(warmup + 1, total);
}

namespace {
// Of the first n forwards of Megatron's interleaved order (get_schedule_table
// with groups of pp microbatches: each group through chunk 0, then chunk 1, …),
// those of chunk c: p per whole group of p·v, plus the part of chunk c's run
// inside the last partial group.
int64_t forwards_of_chunk(int64_t n, int64_t pp, int64_t vpp, int64_t c) {
  const int64_t group = pp * vpp;
  return n / group * pp + std::clamp(n % group - c * pp, int64_t{0}, pp);
}
}  // namespace

int64_t chunk_live_at_peak(int64_t pp, int64_t stage, int64_t m, int64_t vpp, int64_t chunk) {
  const int64_t total = m * vpp;
  const int64_t warmup = std::min(vpp == 1 ? pp - stage - 1 : (pp - stage - 1) * 2 + (vpp - 1) * pp, total);
  if (warmup == total) return m;  // every forward before the first backward
  // After forward k + warm-up and before backward k (k = 0 … total − warm-up − 1)
  // warm-up + 1 pairs are live; of chunk c: its forwards among the first
  // k + warm-up + 1, less the backwards among the first k that were of chunk c
  // — backward j runs chunk vpp − 1 − (chunk of forward j) (get_model_chunk_id
  // with forward=False). The count repeats with period p·v in k (both terms
  // grow by p per group), so one period covers every k.
  int64_t most = 0;
  const int64_t ks = std::min(total - warmup, pp * vpp);
  for (int64_t k = 0; k < ks; ++k)
    most = std::max(most,
                    forwards_of_chunk(k + warmup + 1, pp, vpp, chunk) - forwards_of_chunk(k, pp, vpp, vpp - 1 - chunk));
  return most;
}

double bubble_over_ideal(int64_t pp, int64_t m, int64_t vpp) {
  // Narayanan et al. 2021 §2.2.2: with v chunks per device each forward and
  // backward of a chunk takes 1/v of a stage's time, so the bubble shrinks to
  // (p − 1)/(v·m) of the ideal time.
  return static_cast<double>(pp - 1) / static_cast<double>(vpp * m);
}

int64_t pipeline_message_bytes(const ModelConfig& m, const Layout& l, const RunConfig& r) {
  // Megatron's p2p tensor shape (get_tensor_shapes, megatron/core/pipeline_parallel/schedules.py at
  // d98e8a64ddf34856e74b24714e3bedb2f5a39553): seq_length / context_parallel_size, and / tp under
  // sequence parallelism, × micro_batch_size × hidden_size.
  const int64_t s_r = r.seq / l.cp;
  const int64_t s_l = l.sp ? s_r / l.tp : s_r;
  return checked_product({dtype_bytes(r.dtype), r.mbs, s_l, m.hidden}, "pipeline message bytes");
}

}  // namespace gpuledger::analytic
