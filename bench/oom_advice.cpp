// OOM advice (see oom_advice.h). Uses the analytic budget only.
#include "bench/oom_advice.h"

#include "analytic/budget.h"

namespace gpuledger::bench {

std::vector<FitSuggestion> suggest_fits(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t rank,
                                        int64_t limit_bytes) {
  std::vector<FitSuggestion> out;
  auto consider = [&](const std::string& change, const Layout& l2, const RunConfig& r2, int64_t rank2) {
    try {
      validate_layout(l2, m, r2);
    } catch (const LayoutError&) {
      return;  // the change is not a valid layout for this model
    }
    const int64_t total = analytic::rank_budget(m, l2, r2, rank2).exact.device_total();
    out.push_back({change, total, total <= limit_bytes});
  };
  const Coords c = l.coords(rank);
  for (Recompute rc : {Recompute::kSelective, Recompute::kFull}) {
    if (static_cast<int>(rc) <= static_cast<int>(r.recompute)) continue;
    RunConfig r2 = r;
    r2.recompute = rc;
    consider("--recompute " + std::string(recompute_name(rc)), l, r2, rank);
  }
  if (r.attention == AttentionKind::kMaterialized) {
    RunConfig r2 = r;
    r2.attention = AttentionKind::kFlash;
    consider("--attention flash", l, r2, rank);
  }
  if (r.mbs > 1) {
    RunConfig r2 = r;
    r2.mbs = r.mbs / 2;
    r2.microbatches = r.microbatches * 2;
    consider("--mbs " + std::to_string(r2.mbs) + " (same global batch)", l, r2, rank);
  }
  for (int64_t tp : {l.tp * 2, l.tp * 4, l.tp * 8}) {
    Layout l2 = l;
    l2.tp = tp;
    consider("--tp " + std::to_string(tp) + " (" + std::to_string(l2.world()) + " ranks)", l2, r,
             l2.rank({c.dp, 0, c.pp}));
  }
  if (l.dp > 1)
    for (int z = l.zero + 1; z <= 3; ++z) {
      Layout l2 = l;
      l2.zero = z;
      consider("--zero " + std::to_string(z), l2, r, rank);
    }
  return out;
}

}  // namespace gpuledger::bench
