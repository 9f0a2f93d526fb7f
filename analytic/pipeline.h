// Pipeline closed forms: microbatches in flight per stage and the bubble
// (Narayanan et al. 2021 §2.2; Korthikanti et al. 2022 §4.2.3, Eq. 5).
// Independent of parallel/pp/schedule (a test compares the two).
#pragma once
#include <cstdint>

#include "core/layout.h"
#include "core/model_config.h"
#include "core/run_config.h"

namespace gpuledger::analytic {

// 1F1B: min(p − stage, m); GPipe: m.
int64_t microbatches_in_flight(Schedule s, int64_t pp, int64_t stage, int64_t m);
// (p − 1) / (m + p − 1); interleaved (vpp chunks) (p − 1) / (vpp·m + p − 1).
double bubble_fraction(int64_t pp, int64_t m, int64_t vpp = 1);

// Interleaved 1F1B (vpp model chunks per rank, 1F1B only): the most
// (microbatch, chunk) pairs in flight on `stage` at its activation peak,
// min(w + 1, m·vpp) with w = (p − stage − 1)·2 + (vpp − 1)·p warm-up
// forwards; vpp = 1 gives microbatches_in_flight's 1F1B figure.
int64_t chunk_microbatches_in_flight(int64_t pp, int64_t stage, int64_t m, int64_t vpp);
// Interleaved 1F1B: of the chunk_microbatches_in_flight pairs live at the
// stage's peaks (each moment right after a forward of the steady state), the
// most that belong to chunk `chunk`. The activation peak of a stage whose
// chunks save equal bytes but one (the embedding's chunk 0 on stage 0, the
// head's chunk vpp − 1 on stage p − 1) is in_flight × per chunk + this × the
// extra bytes of that chunk.
int64_t chunk_live_at_peak(int64_t pp, int64_t stage, int64_t m, int64_t vpp, int64_t chunk);
// Bubble time over ideal time, (p − 1) / (vpp·m) (vpp = 1: (p − 1) / m).
double bubble_over_ideal(int64_t pp, int64_t m, int64_t vpp);

// One point-to-point message between stages: the residual stream of one
// microbatch as the rank holds it, e·b·s_r·h with s_r = s/cp (the rank's
// tokens under context parallelism), divided by t under --sp.
int64_t pipeline_message_bytes(const ModelConfig& m, const Layout& l, const RunConfig& r);

}  // namespace gpuledger::analytic
