// The new reports and the baselines of a regress command line (see regress_sides.h).
#include "bench/cli/regress_sides.h"

namespace gpuledger::cli {

RegressSides regress_sides(const std::vector<TypedFile>& typed) {
  RegressSides s;
  // Today's form starts with a new report: then a file on its own after a
  // --baseline continues that --baseline's list, as the multi-value option
  // read it before (regress NEW1 NEW2 --baseline B1 B2).
  const bool reports_first = !typed.empty() && !typed.front().after_baseline_flag;
  bool baseline_seen = false;
  for (const auto& f : typed) {
    baseline_seen = baseline_seen || f.after_baseline_flag;
    const bool baseline = f.after_baseline_flag || (reports_first && baseline_seen);
    (baseline ? s.baselines : s.reports).push_back(f.path);
  }
  return s;
}

}  // namespace gpuledger::cli
