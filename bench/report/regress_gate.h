// The regression gate behind `gpuledger regress` (docs/regress.md states the
// rules): one point's new reports against its baseline reports, each side one
// report or several (repetitions), compared on what must not move at all —
// the loss per step (within a tolerance per dtype), each rank's peak bytes per
// account and communication bytes per collective (exact) — and on what moves
// with noise: MFU and tokens/s, by the medians of the repetitions against the
// spread of the baseline's and, with enough repetitions, a U test.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/report/report_reader.h"

namespace gpuledger::report {

struct GateOptions {
  double perf_tol = 0.05;            // MFU and tokens/s may fall by this fraction (or the baseline's spread)
  std::optional<double> loss_tol;    // relative; default by dtype (loss_tolerance)
  double alpha = 0.05;               // U test significance
  bool allow_other_machine = false;  // a baseline from another fingerprint: flag, and gate no timing
};

// The relative loss tolerance of a run in `dtype`: fp32 1e-5, fp16 1e-3, bf16 1e-2.
double loss_tolerance(const std::string& dtype);

struct GateResult {
  nlohmann::json checks = nlohmann::json::array();  // {name, rank, measured, expected, rel_err, tol, ok, kind, note}
  std::vector<std::string> regressions;             // one line per failed check, naming what changed
  std::vector<std::string> notes;                   // what was not gated, and why
  nlohmann::json metrics;                           // the new side's figures (for --history)
  bool ok() const { return regressions.empty(); }
};

// Throws ConfigError (bad input, exit 2) when the sides are not one point:
// kinds or configurations differ, reports within a side differ, or the
// fingerprints differ and other machines are not allowed; ReportFormatError
// (a ConfigError) naming the file and the JSON path of a figure that is
// missing or of the wrong type.
GateResult run_gate(const std::vector<ReportFile>& current, const std::vector<ReportFile>& baseline,
                    const GateOptions& o);

// The samples of a higher-is-better figure ("mfu", "tokens_per_s") over the
// reports of a side: each report's summary.repeats[*].<name> when it has
// repetitions, else its summary.<name>; nulls left out.
std::vector<double> figure_samples(const std::vector<ReportFile>& side, const std::string& name);

}  // namespace gpuledger::report
