// Sweep headlines and table (see sweep_index.h).
#include "bench/report/sweep_index.h"

#include <fmt/format.h>

#include <algorithm>

#include <array>
#include <map>

#include "bench/report/format.h"
#include "bench/report/table.h"

namespace gpuledger::report {

using nlohmann::json;

namespace {

json max_over_ranks(const json& doc, const std::vector<std::string>& path) {
  json best = nullptr;
  for (const auto& r : doc.value("ranks", json::array())) {
    const json* v = &r;
    for (const auto& k : path) {
      if (!v->is_object() || !v->contains(k)) {
        v = nullptr;
        break;
      }
      v = &(*v)[k];
    }
    if (v && v->is_number() && (best.is_null() || v->get<double>() > best.get<double>())) best = *v;
  }
  return best;
}

// The largest measured peak over the ranks of one pipeline-stage class: the
// first stage (embedding), the middle ones, the last (head and loss); with one
// stage every rank is both first and last.
json stage_peak(const json& doc, const std::string& which) {
  json best = nullptr;
  for (const auto& r : doc.value("ranks", json::array())) {
    if (!r.contains("coords") || !r.contains("measured")) continue;
    const int64_t pp = r["coords"].value("pp", int64_t{0});
    const int64_t stages = doc.value("config", json::object()).value("layout", json::object()).value("pp", int64_t{1});
    const bool in = which == "first" ? pp == 0 : which == "last" ? pp == stages - 1 : pp > 0 && pp < stages - 1;
    const json v = r["measured"].value("peak_bytes", json());
    if (in && v.is_number() && (best.is_null() || v.get<double>() > best.get<double>())) best = v;
  }
  return best;
}

json summary_value(const json& doc, const std::vector<std::string>& path) {
  if (!doc.contains("summary")) return nullptr;
  const json* v = &doc["summary"];
  for (const auto& k : path) {
    if (!v->is_object() || !v->contains(k)) return nullptr;
    v = &(*v)[k];
  }
  return *v;
}

std::string cell(const json& v, const std::string& how) {
  if (v.is_null()) return "-";
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  const double x = v.get<double>();
  if (how == "bytes") return format_bytes(x);
  if (how == "percent") return format_percent(x);
  if (how == "seconds") return format_seconds(x);
  if (how == "ms") return format_seconds(x / 1e3);
  if (how == "count") return format_count(static_cast<int64_t>(x));
  if (how == "flops") return format_si(x, "FLOP");
  return fmt::format("{:.{}f}", x, how == "loss" ? 4 : 1);
}

}  // namespace

// What the index and the table show per point; null where the report has no such figure.
json headline(const std::string& kind, const json& doc) {
  json h;
  h["budget_peak_bytes"] = max_over_ranks(doc, {"analytic", "exact", "total"});
  if (kind == "plan") {
    h["fits"] = summary_value(doc, {"fits"});
    h["model_flops_per_step"] = summary_value(doc, {"model_flops_per_step"});
    h["step_time_lower_bound_s"] = summary_value(doc, {"step_time_lower_bound_s"});
  } else if (kind == "kv") {
    h["kv_bytes_per_token"] = summary_value(doc, {"kv_bytes_per_token"});
    h["kv_reserved_bytes"] = summary_value(doc, {"kv_reserved_bytes"});
    h["capacity_sequences"] = summary_value(doc, {"capacity_sequences"});
    h["tokens_per_s"] = summary_value(doc, {"decode_roofline", "tokens_per_s"});
  } else {
    h["peak_bytes"] = max_over_ranks(doc, {"measured", "peak_bytes"});
    for (const char* c : {"first", "middle", "last"})
      h[std::string("peak_bytes_") + c + (std::string(c) == "middle" ? "_stages" : "_stage")] = stage_peak(doc, c);
    h["tokens_per_s"] = summary_value(doc, {"tokens_per_s"});
    h["mfu"] = summary_value(doc, {"mfu"});
    if (kind == "train") {
      // A predicted step (train --backend meta with a profile): what a layout search ranks by.
      if (doc.contains("prediction")) {
        h["predicted_step_ms"] = summary_value(doc, {"predicted", "step_ms"});
        h["predicted_tokens_per_s"] = summary_value(doc, {"predicted", "tokens_per_s"});
        h["predicted_mfu"] = summary_value(doc, {"predicted", "mfu"});
      }
      h["hfu"] = summary_value(doc, {"hfu"});
      h["median_step_ms"] = summary_value(doc, {"median_step_ms"});
      const json loss = summary_value(doc, {"loss"});
      h["loss"] = loss.is_array() && !loss.empty() ? loss.back() : json(nullptr);
    } else {
      h["capacity_sequences"] = summary_value(doc, {"capacity_sequences"});
      h["capacity_predicted"] = summary_value(doc, {"capacity_predicted"});
    }
  }
  int64_t failed = 0;
  for (const auto& c : doc.value("checks", json::array())) failed += c.value("ok", true) ? 0 : 1;
  h["checks_failed"] = failed;
  return h;
}

namespace {

double predicted_rate(const json& point) {
  const json h = point.value("headline", json::object());
  const json v = h.value("predicted_tokens_per_s", json(nullptr));
  return point["status"] == "ok" && v.is_number() ? v.get<double>() : -1.0;
}

}  // namespace

void print_sweep_table(std::ostream& os, const std::string& kind, const json& index) {
  // Points with a predicted step are a layout search: those that ran (fit) first,
  // fastest first, then the rest in their order.
  json pts = index["points"];
  const bool predicted = std::any_of(pts.begin(), pts.end(), [](const json& p) { return predicted_rate(p) >= 0; });
  if (predicted)
    std::stable_sort(pts.begin(), pts.end(),
                     [](const json& a, const json& b) { return predicted_rate(a) > predicted_rate(b); });
  // (header, headline key, format) per kind.
  std::vector<std::array<std::string, 3>> cols;
  if (kind == "plan")
    cols = {{"budget peak", "budget_peak_bytes", "bytes"},
            {"fits", "fits", ""},
            {"model FLOP/step", "model_flops_per_step", "flops"},
            {"step ≥", "step_time_lower_bound_s", "seconds"}};
  else if (kind == "kv")
    cols = {{"KV/token", "kv_bytes_per_token", "bytes"},
            {"reserved", "kv_reserved_bytes", "bytes"},
            {"capacity", "capacity_sequences", "count"},
            {"roofline tok/s", "tokens_per_s", ""}};
  else if (kind == "train" && predicted)
    cols = {{"peak", "peak_bytes", "bytes"},
            {"budget", "budget_peak_bytes", "bytes"},
            {"step (predicted)", "predicted_step_ms", "ms"},
            {"tokens/s (predicted)", "predicted_tokens_per_s", ""},
            {"MFU (predicted)", "predicted_mfu", "percent"}};
  else if (kind == "train")
    cols = {{"peak", "peak_bytes", "bytes"},
            {"budget", "budget_peak_bytes", "bytes"},
            {"tokens/s", "tokens_per_s", ""},
            {"MFU", "mfu", "percent"},
            {"loss", "loss", "loss"}};
  else
    cols = {{"peak", "peak_bytes", "bytes"},
            {"capacity", "capacity_sequences", "count"},
            {"predicted", "capacity_predicted", "count"},
            {"tokens/s", "tokens_per_s", ""},
            {"MFU", "mfu", "percent"}};
  const auto summary = index.value("summary", json::object());
  Table t(fmt::format("sweep: {} points of `{}`, reports in {}", pts.size(), kind, index["out"].get<std::string>()));
  std::vector<std::string> names = {"point", "status"};
  for (const auto& c : cols) names.push_back(c[0]);
  t.columns(names);
  std::map<std::string, int64_t> skipped;  // reason → points: one line, not one row each
  for (const auto& p : pts) {
    if (p["status"] == "skipped") {
      ++skipped[p.value("reason", std::string("skipped"))];
      continue;
    }
    std::vector<std::string> row = {p["name"], p["status"]};
    const json h = p.value("headline", json::object());
    for (const auto& c : cols) row.push_back(cell(h.value(c[1], json(nullptr)), c[2]));
    t.row(row);
    if (p["status"] != "ok" && p["status"] != "missing")
      t.note(fmt::format("{}: {}", p["name"].get<std::string>(), p.value("error", std::string("failed"))));
  }
  int64_t n_skipped = 0;
  for (const auto& [why, n] : skipped) n_skipped += n;
  if (n_skipped > 0) {
    std::string why = skipped.size() == 1 ? skipped.begin()->first : fmt::format("{} reasons", skipped.size());
    if (skipped.size() > 1)
      for (const auto& [w, n] : skipped) why += fmt::format("; {} × {}", n, w);
    t.note(fmt::format("{} points skipped (the subcommand refuses them, nothing ran): {}", n_skipped, why));
  }
  if (predicted && predicted_rate(pts.front()) > 0)
    t.note(fmt::format("sorted by predicted tokens/s: the fastest layout that fits is {}",
                       pts.front()["name"].get<std::string>()));
  t.note(fmt::format("{} of {} points ok, {} skipped, {} failed{}", summary.value("ok", int64_t{0}), pts.size(),
                     n_skipped, summary.value("failed", int64_t{0}),
                     summary.value("missing", int64_t{0}) > 0
                         ? fmt::format(", {} not run yet", summary["missing"].get<int64_t>())
                         : std::string()));
  os << t.render();
}

}  // namespace gpuledger::report
