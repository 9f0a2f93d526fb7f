// Pipeline closed forms: microbatches in flight on a stage at its activation
// peak, and the bubble. Written from the schedules' definitions, not from
// parallel/pp/schedule (a test compares the two).
#include "analytic/pipeline.h"

#include <algorithm>

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

double bubble_fraction(int64_t pp, int64_t m) {
  // Narayanan et al. 2021 §2.2.1: bubble time / ideal time = (p − 1) / m, i.e.
  // (p − 1) / (m + p − 1) of the whole step (same for GPipe and 1F1B).
  return static_cast<double>(pp - 1) / static_cast<double>(m + pp - 1);
}

}  // namespace gpuledger::analytic
