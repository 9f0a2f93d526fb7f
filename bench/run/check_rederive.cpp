// Re-derivation of a report's budget from its config (see check_rederive.h).
#include "bench/run/check_rederive.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "analytic/params.h"
#include "bench/report/checks.h"
#include "bench/report/plan_json.h"
#include "bench/run/plan_run.h"
#include "core/account.h"
#include "core/layout.h"
#include "core/model_config.h"

namespace gpuledger::run {

using nlohmann::json;
using report::JsonView;

namespace {

template <typename T>
T named(std::optional<T> v, const JsonView& j) {
  if (!v) j.fail("unknown value '" + j.string() + "'");
  return *v;
}

// "rederive.<path>": the report's figure (measured) against this binary's
// (expected), to the byte. A figure the report lacks reads as −1: a difference.
void compare(json& checks, const std::string& path, int64_t rank, const std::optional<JsonView>& stated,
             double derived) {
  checks.push_back(bench::make_check("rederive." + path, rank, stated ? stated->number() : -1.0, derived, 0.0));
}

// The analytic block train writes for `rank` under `c`: the same functions
// (plan_rank → plan_rank_json) as the run that wrote the report.
json derived_rank(const ResolvedConfig& c, int64_t rank) {
  return report::plan_rank_json(plan_rank(c, rank, std::nullopt));
}

void compare_analytic(json& checks, const JsonView& stated_rank, const json& derived, int64_t rank) {
  const JsonView sa = stated_rank.at("analytic");
  const json& da = derived.at("analytic");
  const JsonView exact = sa.at("exact");
  for (const auto& [name, value] : da.at("exact").items())
    compare(checks, "analytic.exact." + name, rank, exact.find(name), value.get<double>());
  // Every collective@group either side names.
  const JsonView comm = sa.at("comm");
  json keys = json::object();
  for (const auto& [k, v] : da.at("comm").items()) keys[k] = v;
  for (const auto& [k, v] : comm.members())
    if (!keys.contains(k)) keys[k] = {{"calls", 0}, {"bytes", 0}};
  for (const auto& [k, v] : keys.items()) {
    const auto stated = comm.find(k);
    const auto calls = stated ? stated->find("calls") : std::optional<JsonView>();
    const auto bytes = stated ? stated->find("bytes") : std::optional<JsonView>();
    if (!stated) {  // absent from the report: it states zero calls
      checks.push_back(
          bench::make_check("rederive.analytic.comm." + k + ".calls", rank, 0.0, v.at("calls").get<double>(), 0.0));
      checks.push_back(
          bench::make_check("rederive.analytic.comm." + k + ".bytes", rank, 0.0, v.at("bytes").get<double>(), 0.0));
      continue;
    }
    compare(checks, "analytic.comm." + k + ".calls", rank, calls, v.at("calls").get<double>());
    compare(checks, "analytic.comm." + k + ".bytes", rank, bytes, v.at("bytes").get<double>());
  }
  const JsonView flops = stated_rank.at("flops");
  for (const char* f : {"analytic_hardware", "analytic_model"})
    compare(checks, std::string("flops.") + f, rank, flops.find(f), derived.at("flops").at(f).get<double>());
}

// Σ at_peak == peak_bytes, and no account's own peak above the total peak:
// over the device accounts (peak_bytes is the device total; host memory is apart).
void total_checks(json& checks, const JsonView& measured, int64_t rank) {
  const double peak = measured.at("peak_bytes").number();
  double at_peak = 0, largest = 0;
  for (Account a : kAllAccounts) {
    if (!is_device_account(a)) continue;
    const std::string_view name = account_name(a);
    at_peak += measured.at("at_peak").at(name).number();
    largest = std::max(largest, measured.at("peak_by_account").at(name).number());
  }
  checks.push_back(bench::make_check("total.peak_bytes==sum(at_peak)", rank, peak, at_peak, 0.0));
  checks.push_back(bench::make_bound_check("total.max(peak_by_account)<=peak_bytes", rank, largest, peak));
}

int64_t rank_of(const JsonView& r, const ResolvedConfig& c) {
  const int64_t rank = r.at("rank").integer();
  if (rank < 0 || rank >= c.layout.world())
    r.at("rank").fail(fmt::format("rank {} outside the config's world of {}", rank, c.layout.world()));
  return rank;
}

json train_checks(const JsonView& doc, const ResolvedConfig& c) {
  json checks = json::array();
  for (const auto& r : doc.at("ranks").elements()) {
    const int64_t rank = rank_of(r, c);
    const json derived = derived_rank(c, rank);
    compare_analytic(checks, r, derived, rank);
    // The measurement against the re-derived budget: the report's rank with
    // its analytic block and analytic FLOPs replaced by this binary's.
    json against = r.raw();
    against["analytic"] = derived.at("analytic");
    against["flops"]["analytic_hardware"] = derived.at("flops").at("analytic_hardware");
    for (auto& ck : bench::rank_checks(JsonView(against, r.file(), r.json_path()))) {
      ck["name"] = "measured_vs_rederived." + ck["name"].get<std::string>();
      checks.push_back(ck);
    }
    total_checks(checks, r.at("measured"), rank);
  }
  return checks;
}

json infer_checks(const JsonView& doc, const ResolvedConfig& c) {
  json checks = json::array();
  for (const auto& r : doc.at("ranks").elements()) {
    if (!r.has("measured")) continue;
    const int64_t rank = rank_of(r, c);
    const auto weights = static_cast<double>(analytic::rank_params(c.model, c.layout, rank) * dtype_bytes(c.run.dtype));
    compare(checks, "analytic.exact.weights", rank, r.at("analytic").at("exact").find("weights"), weights);
    checks.push_back(bench::make_check("measured_vs_rederived.weights", rank,
                                       r.at("measured").at("peak_by_account").at("weights").number(), weights, 0.0));
    total_checks(checks, r.at("measured"), rank);
  }
  return checks;
}

}  // namespace

ResolvedConfig config_from_report(const JsonView& config) {
  ResolvedConfig c;
  const JsonView model = config.at("model");
  if (!model.is_object()) model.fail("expected an object");
  c.model = parse_model_config(model.raw().dump(), config.file() + ": " + model.json_path());
  const JsonView l = config.at("layout");
  c.layout.dp = l.at("dp").integer();
  c.layout.tp = l.at("tp").integer();
  c.layout.pp = l.at("pp").integer();
  c.layout.zero = static_cast<int>(l.at("zero").integer());
  c.layout.sp = l.at("sp").boolean();
  if (l.has("vpp")) c.layout.vpp = l.at("vpp").integer();  // absent: 1, not interleaved
  if (l.has("cp")) c.layout.cp = l.at("cp").integer();     // absent: 1, no context parallelism
  if (l.has("ep")) c.layout.ep = l.at("ep").integer();     // absent: 1, no expert parallelism
  if (l.has("world") && l.at("world").integer() != c.layout.world())
    l.at("world").fail(fmt::format("{} but dp·tp·pp·cp = {}", l.at("world").integer(), c.layout.world()));
  const JsonView r = config.at("run");
  c.run.seq = r.at("seq").integer();
  c.run.mbs = r.at("mbs").integer();
  c.run.microbatches = r.at("microbatches").integer();
  c.run.schedule = named(schedule_from_name(r.at("schedule").string()), r.at("schedule"));
  c.run.recompute = named(recompute_from_name(r.at("recompute").string()), r.at("recompute"));
  c.run.attention = named(attention_from_name(r.at("attention").string()), r.at("attention"));
  c.run.dtype = named(dtype_from_name(r.at("dtype").string()), r.at("dtype"));
  c.run.grad_dtype = named(dtype_from_name(r.at("grad_dtype").string()), r.at("grad_dtype"));
  c.run.dropout = r.at("dropout").number();
  c.run.seed = static_cast<uint64_t>(r.at("seed").integer());
  c.run.bucket_mb = r.at("bucket_mb").number();
  c.run.overlap_grad_reduce = r.at("overlap_grad_reduce").boolean();
  c.run.prefetch = r.at("prefetch").integer();
  // Reports written before --optimizer existed ran AdamW.
  if (r.has("optimizer")) c.run.optimizer = named(optimizer_from_name(r.at("optimizer").string()), r.at("optimizer"));
  if (r.has("momentum")) c.run.momentum = r.at("momentum").number();
  if (r.has("offload")) {
    if (r.at("offload").string() != "optimizer") r.at("offload").fail("expected \"optimizer\"");
    c.run.offload_optimizer = true;
  }
  if (r.has("fp8")) {  // absent: no FP8
    const JsonView fp8 = r.at("fp8");
    c.run.fp8 = named(fp8_recipe_from_name(fp8.at("recipe").string()), fp8.at("recipe"));
    c.run.fp8_amax_history_len = fp8.at("amax_history_len").integer();
  }
  validate_layout(c.layout, c.model, c.run);
  return c;
}

json rederived_checks(const JsonView& doc) {
  const ResolvedConfig c = config_from_report(doc.at("config"));
  const std::string kind = doc.at("kind").string();
  if (kind == "train") return train_checks(doc, c);
  if (kind == "infer") return infer_checks(doc, c);
  doc.at("kind").fail("'" + kind + "' has no measurement to re-derive (train and infer reports do)");
}

}  // namespace gpuledger::run
