// `gpuledger train --repeat N`: one report from N runs of the same point. The
// bytes, FLOPs and losses of a run do not depend on the repetition, its times
// do; the regression gate compares the medians of the repetitions and their
// spread (docs/regress.md), so every repetition's figures are kept.
#pragma once
#include <vector>

#include <nlohmann/json.hpp>

namespace gpuledger::report {

// The report of the median repetition (by median step time: the middle one,
// the faster of the middle two for even N), with summary.repeats = [{"mfu",
// "hfu", "tokens_per_s", "median_step_ms"} per repetition, in run order], and
// a check "repeat.same_bytes" per later repetition whose ranks' peak bytes or
// losses differ from the first's. A failed repetition's report is returned as
// it is. `docs` must not be empty.
nlohmann::json combine_repeats(const std::vector<nlohmann::json>& docs);

}  // namespace gpuledger::report
