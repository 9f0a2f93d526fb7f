// The plan's summary (see plan_summary.h).
#include "bench/report/plan_summary.h"

#include <fmt/format.h>

#include "bench/report/format.h"
#include "bench/report/table.h"

namespace gpuledger::report {

using nlohmann::json;

namespace {

std::string fit_cell(const json& rank) {
  const std::string total = format_bytes(rank["analytic"]["exact"]["total"].get<double>());
  if (!rank.contains("fits")) return total;
  const double head = rank["headroom_bytes"].get<double>();
  return fmt::format("{} of {}: {}", total, format_bytes(rank["device_bytes"].get<double>()),
                     rank["fits"].get<bool>() ? "fits, " + format_bytes(head) + " free"
                                              : "DOES NOT FIT, over by " + format_bytes(-head));
}

}  // namespace

double model_states_bytes(const json& rank) {
  const auto& ex = rank["analytic"]["exact"];
  return ex["weights"].get<double>() + ex["grads"].get<double>() + ex["master"].get<double>() +
         ex["optim"].get<double>() + ex.value("host", 0.0);
}

int tightest_rank_index(const json& doc) {
  const auto& ranks = doc["ranks"];
  int best = -1;
  for (int i = 0; i < static_cast<int>(ranks.size()); ++i) {
    const json& r = ranks[static_cast<size_t>(i)];
    if (best < 0) {
      best = i;
      continue;
    }
    const json& b = ranks[static_cast<size_t>(best)];
    const bool tighter = r.contains("fits") ? r["headroom_bytes"].get<double>() < b["headroom_bytes"].get<double>()
                                            : r["analytic"]["exact"]["total"].get<double>() >
                                                  b["analytic"]["exact"]["total"].get<double>();
    if (tighter) best = i;
  }
  return best;
}

void print_plan_summary(std::ostream& os, const json& doc) {
  const auto& ranks = doc["ranks"];
  const auto& s = doc["summary"];
  const int tight = tightest_rank_index(doc);
  Table t("summary");
  t.columns({"question", "answer"});
  if (s.contains("fits")) {
    int over = 0;
    for (const auto& r : ranks) over += r["fits"].get<bool>() ? 0 : 1;
    t.row({"fits", over == 0 ? fmt::format("yes: all {} rank classes", ranks.size())
                             : fmt::format("NO: {} of {} rank classes do not fit", over, ranks.size())});
  } else {
    t.row({"fits", "no device given (--device or --device-memory): bytes only"});
  }
  for (const auto& r : ranks) t.row({"  " + r["role"].get<std::string>(), fit_cell(r)});
  if (tight >= 0) {
    const json& r = ranks[static_cast<size_t>(tight)];
    const std::string role = r["role"].get<std::string>();
    t.row({"tightest rank", role});
    t.row({"  model states", fmt::format("{} ({} parameters held)", format_bytes(model_states_bytes(r)),
                                         format_count(r["params"].get<int64_t>()))});
    t.row({"  activations", fmt::format("{} ({} microbatches in flight)",
                                        format_bytes(r["analytic"]["exact"]["activations"].get<double>()),
                                        r["in_flight_microbatches"].get<int64_t>())});
  }
  // The predicted step first (train's simulation on the profiles), the lower bound beside it.
  if (s.contains("predicted") && s["predicted"].contains("step_ms")) {
    const json& p = s["predicted"];
    t.row({"step time", fmt::format("{} predicted ({} / {} profiles)", format_seconds(p["step_ms"].get<double>() / 1e3),
                                    p["device_profile"].get<std::string>(), p["network_profile"].get<std::string>())});
    t.row({"  tokens/s, MFU", fmt::format("{}, {}", format_si(p["tokens_per_s"].get<double>(), ""),
                                          format_percent(p["mfu"].get<double>()))});
  } else if (s.contains("predicted")) {
    t.row({"step time", "not predicted: " + s["predicted"]["error"].get<std::string>()});
  }
  t.row({s.contains("predicted") ? "  lower bound" : "step time",
         s["step_time_lower_bound_s"].is_null()
             ? std::string("unknown (no peak: give --device)")
             : fmt::format("≥ {} (every op at the device's peak, comm hidden)",
                           format_seconds(s["step_time_lower_bound_s"].get<double>()))});
  os << t.render() << "\n";
}

}  // namespace gpuledger::report
