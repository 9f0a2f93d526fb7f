// Which files on a `gpuledger regress` command line are the new reports and
// which the baselines, in the orders people type (docs/regress.md):
//
//   regress NEW... --baseline BASE...                today's form: every file after --baseline is a baseline
//   regress --baseline BASE [--baseline BASE...] NEW...   baselines first: --baseline takes one file each
//
// --baseline takes one file per occurrence, so the file after it in the second
// form is not swallowed as another baseline; the first form keeps its meaning
// because, once a new report has been named before --baseline, the files after
// it can only be more baselines.
#pragma once
#include <string>
#include <vector>

namespace gpuledger::cli {

// One file as typed: the value of a --baseline, or a file on its own.
struct TypedFile {
  bool after_baseline_flag = false;  // the value of --baseline FILE (or --baseline=FILE)
  std::string path;
};

struct RegressSides {
  std::vector<std::string> reports, baselines;  // each in the order typed
};

// The two sides of the files in the order they were typed.
RegressSides regress_sides(const std::vector<TypedFile>& typed);

}  // namespace gpuledger::cli
