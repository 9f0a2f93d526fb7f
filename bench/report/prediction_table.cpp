// Printing the predicted step (see prediction_table.h).
#include "bench/report/prediction_table.h"

#include <fmt/format.h>

#include <set>
#include <string>
#include <vector>

#include "bench/report/format.h"
#include "bench/report/prediction_json.h"
#include "bench/report/table.h"

namespace gpuledger::report {
namespace {

// A stage's cells after its rank and role: the figures, as printed.
std::vector<std::string> figures(const run::PredictedRank& r, const std::set<std::string>& streams) {
  std::vector<std::string> row = {format_seconds(r.step_seconds), format_seconds(r.compute_seconds)};
  for (const auto& s : streams) {
    const auto it = r.exposed_comm_seconds.find(s);
    row.push_back(format_seconds(it == r.exposed_comm_seconds.end() ? 0.0 : it->second));
  }
  row.push_back(format_seconds(r.wait_seconds));
  row.push_back(format_seconds(r.tail_seconds));
  return row;
}

}  // namespace

void print_prediction(std::ostream& os, const run::StepPrediction& p) {
  os << fmt::format("\n# predicted step: device profile {} ({}), network profile {} ({}){}\n", p.device_profile,
                    p.device_provenance, p.network_profile, p.network_provenance,
                    std::string(p.tp_comm_overlap ? "; TP communication overlapped with the GEMMs" : "") +
                        (p.contiguous_grad_buffer ? "; DP gradient buckets reduced in place" : ""));
  os << fmt::format("#   step {}, {} tokens/s, MFU {}, HFU {} ({} devices at {} each; simulated in {})\n",
                    format_seconds(p.step_seconds), format_si(p.tokens_per_s, ""), format_percent(p.mfu),
                    format_percent(p.hfu), format_count(p.devices), format_si(p.peak_flops_per_device, "FLOP/s"),
                    format_seconds(p.simulate_seconds));
  std::set<std::string> streams;
  for (const auto& r : p.ranks)
    for (const auto& [s, t] : r.exposed_comm_seconds) streams.insert(s);
  std::vector<std::string> cols = {"rank", "role", "step", "compute"};
  for (const auto& s : streams) cols.push_back("exposed " + stream_group(s));
  cols.insert(cols.end(), {"bubble", "tail"});
  std::string title =
      fmt::format("one rank per pipeline stage, simulated together; the slowest is r{}", p.critical_rank);
  if (p.ranks.size() > 1)
    title += fmt::format("; the bubble formula (p−1)/(v·m+p−1) gives {}", format_percent(p.bubble_formula_fraction));
  Table t(title);
  t.columns(cols);
  // Consecutive stages whose figures print alike share one row.
  for (size_t i = 0; i < p.ranks.size();) {
    const auto cells = figures(p.ranks[i], streams);
    size_t j = i + 1;
    while (j < p.ranks.size() && figures(p.ranks[j], streams) == cells) ++j;
    std::vector<std::string> row = {std::to_string(p.ranks[i].rank), p.ranks[i].role};
    if (j - i > 1)
      row = {fmt::format("{}…{}", p.ranks[i].rank, p.ranks[j - 1].rank), fmt::format("{} stages alike", j - i)};
    row.insert(row.end(), cells.begin(), cells.end());
    t.row(row);
    i = j;
  }
  t.note("bubble: the stage waiting for its neighbours; tail: compute idle while a started collective ends");
  os << t.render();
}

}  // namespace gpuledger::report
