// --grid layout=auto: every dp·tp·pp factorisation of the sweep's world that
// the model allows, as one grid axis whose values set --dp, --tp and --pp.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/cli/sweep_grid.h"

namespace gpuledger::cli {

struct LayoutChoice {
  int64_t dp = 1, tp = 1, pp = 1;
};

// Every (dp, tp, pp) with dp·tp·pp = world: tp slowest, then pp, dp = world / (tp·pp).
std::vector<LayoutChoice> factorisations(int64_t world);

// Why the model refuses a layout (heads, KV heads, ffn, layers, sequence under
// sp: core/layout.h validate_layout), or nullopt when it allows it.
using LayoutRefusal = std::function<std::optional<std::string>(const LayoutChoice&)>;

struct AutoLayouts {
  GridAxis axis;                                              // key "layout"; each value sets dp, tp and pp
  std::vector<std::pair<LayoutChoice, std::string>> refused;  // factorisations the model refuses, and why
};

// The layout axis of `world`, keeping only the choices whose dp, tp and pp are
// among `filters` (--grid tp=1,2 beside layout=auto; a key absent keeps all).
// Throws SweepUsage when no choice is left.
AutoLayouts auto_layout_axis(int64_t world, const std::map<std::string, std::vector<std::string>>& filters,
                             const LayoutRefusal& refuse);

}  // namespace gpuledger::cli
