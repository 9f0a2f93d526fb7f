// layout=auto (see sweep_layouts.h).
#include "bench/cli/sweep_layouts.h"

#include <fmt/format.h>

#include <algorithm>

namespace gpuledger::cli {

std::vector<LayoutChoice> factorisations(int64_t world) {
  std::vector<LayoutChoice> out;
  for (int64_t tp = 1; tp <= world; ++tp) {
    if (world % tp != 0) continue;
    for (int64_t pp = 1; pp <= world / tp; ++pp)
      if ((world / tp) % pp == 0) out.push_back({world / (tp * pp), tp, pp});
  }
  return out;
}

namespace {

bool passes(const std::map<std::string, std::vector<std::string>>& filters, const std::string& key, int64_t v) {
  const auto it = filters.find(key);
  if (it == filters.end()) return true;
  return std::find(it->second.begin(), it->second.end(), std::to_string(v)) != it->second.end();
}

}  // namespace

AutoLayouts auto_layout_axis(int64_t world, const std::map<std::string, std::vector<std::string>>& filters,
                             const LayoutRefusal& refuse) {
  for (const auto& [key, values] : filters)
    for (const auto& v : values)
      if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos)
        throw SweepUsage("--grid " + key + "=" + v + " beside layout=auto: a filter value is a rank count");
  AutoLayouts out;
  out.axis.key = "layout";
  for (const LayoutChoice& c : factorisations(world)) {
    if (!passes(filters, "dp", c.dp) || !passes(filters, "tp", c.tp) || !passes(filters, "pp", c.pp)) continue;
    if (auto why = refuse(c)) {
      out.refused.emplace_back(c, *why);
      continue;
    }
    out.axis.values.push_back(fmt::format("dp{}_tp{}_pp{}", c.dp, c.tp, c.pp));
    out.axis.settings.push_back(
        {{"dp", std::to_string(c.dp)}, {"tp", std::to_string(c.tp)}, {"pp", std::to_string(c.pp)}});
  }
  if (out.axis.values.empty()) {
    std::string why;
    for (const auto& [c, reason] : out.refused)
      why += fmt::format("\n  dp {} tp {} pp {}: {}", c.dp, c.tp, c.pp, reason);
    throw SweepUsage(fmt::format("--grid layout=auto: no dp·tp·pp factorisation of world {} is left{}", world,
                                 why.empty() ? " after the filters" : ": the model refuses every one" + why));
  }
  return out;
}

}  // namespace gpuledger::cli
