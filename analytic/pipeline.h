// Pipeline closed forms: microbatches in flight per stage and the bubble
// (Narayanan et al. 2021 §2.2; Korthikanti et al. 2022 §4.2.3, Eq. 5).
// Independent of parallel/pp/schedule (a test compares the two).
#pragma once
#include <cstdint>

#include "core/run_config.h"

namespace gpuledger::analytic {

// 1F1B: min(p − stage, m); GPipe: m.
int64_t microbatches_in_flight(Schedule s, int64_t pp, int64_t stage, int64_t m);
// (p − 1) / (m + p − 1).
double bubble_fraction(int64_t pp, int64_t m);

}  // namespace gpuledger::analytic
