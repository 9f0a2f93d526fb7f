// Train record → report JSON (see train_json.h).
#include "bench/report/train_json.h"

#include <fmt/format.h>

#include <algorithm>

#include "analytic/flops.h"
#include "analytic/params.h"
#include "analytic/pipeline.h"
#include "bench/oom_advice.h"
#include "bench/report/checks.h"
#include "bench/report/comm_bandwidth.h"
#include "bench/report/hardware_fma_json.h"
#include "bench/report/ledger_json.h"
#include "bench/report/mfu.h"
#include "bench/report/plan_json.h"
#include "bench/report/prediction_json.h"
#include "bench/report/report.h"
#include "bench/report/train_steps_json.h"

namespace gpuledger::report {

using nlohmann::json;

namespace {

json op_time_json(const std::map<std::string, OpTime>& times) {
  json ops = json::object();
  double total = 0;
  for (const auto& [name, t] : times) total += t.seconds;
  for (const auto& [name, t] : times)
    ops[name] = {{"calls", t.calls},
                 {"seconds", t.seconds},
                 {"flops", t.flops},
                 {"share", total > 0 ? t.seconds / total : 0.0},
                 {"flops_per_s", t.seconds > 0 ? t.flops / t.seconds : 0.0}};
  return ops;
}

}  // namespace

json train_rank_json(const bench::TrainRankRecord& r) {
  json j = plan_rank_json(r.analytic);
  j["measured"] = ledger_json(r.measured);
  j["comm"] = comm_json(r.comm);
  j["time"] = {{"step_ms", r.step_ms},
               {"step_peak_bytes", r.step_peak_bytes},
               {"median_step_ms", r.median_step_ms},
               {"median_compute_ms", r.median_compute_ms},
               {"median_comm_ms", r.median_comm_ms}};
  if (r.executed_flops_per_step) j["flops"]["executed_per_step"] = *r.executed_flops_per_step;
  j["flops"]["executed_same_every_step"] = r.executed_same_every_step;
  if (r.op_time) j["op_time"] = op_time_json(*r.op_time);
  // Written for MoE models only, so that other reports keep their form.
  if (!r.moe_dropped_choices.empty()) j["moe"] = {{"dropped_choices_per_step", r.moe_dropped_choices}};
  j["status"] = r.status;
  if (r.status != "ok") j["error"] = r.error;
  return j;
}

bench::TrainRankRecord train_rank_from_json(const json& j) {
  bench::TrainRankRecord r;
  r.analytic = plan_rank_from_json(j);
  r.measured = ledger_record_from_json(j.at("measured"));
  r.comm = comm_from_json(j.at("comm"));
  const json& t = j.at("time");
  r.step_ms = t.at("step_ms").get<std::vector<double>>();
  r.step_peak_bytes = t.value("step_peak_bytes", std::vector<int64_t>{});
  r.median_step_ms = t.at("median_step_ms").get<double>();
  r.median_compute_ms = t.at("median_compute_ms").get<double>();
  r.median_comm_ms = t.at("median_comm_ms").get<double>();
  const json& f = j.at("flops");
  if (f.contains("executed_per_step")) r.executed_flops_per_step = f["executed_per_step"].get<int64_t>();
  r.executed_same_every_step = f.at("executed_same_every_step").get<bool>();
  if (j.contains("op_time")) {
    r.op_time.emplace();
    for (const auto& [name, o] : j["op_time"].items())
      (*r.op_time)[name] = {o.at("calls").get<int64_t>(), o.at("seconds").get<double>(), o.at("flops").get<int64_t>()};
  }
  if (j.contains("moe")) r.moe_dropped_choices = j["moe"].at("dropped_choices_per_step").get<std::vector<int64_t>>();
  r.status = j.at("status").get<std::string>();
  r.error = j.value("error", "");
  return r;
}

namespace {

// The predicted step beside the runs: its section, its summary figures, and
// its checks — MFU at most 1, and each simulated rank that was also reported
// recording exactly the FLOPs the rank executed (the program holds every op).
void add_prediction(json& doc, json& sum, const run::StepPrediction& p, const std::vector<bench::RankRun>& runs) {
  doc["prediction"] = prediction_json(p);
  sum["predicted"] = predicted_summary_json(p);
  doc["checks"].push_back(bench::make_bound_check("mfu (predicted) <= 1", 0, p.mfu, 1.0));
  for (const auto& pr : p.ranks)
    for (const auto& run : runs)
      if (run.record.analytic.budget.rank == pr.rank && run.record.executed_flops_per_step)
        doc["checks"].push_back(bench::make_check("prediction.flops==executed", pr.rank, static_cast<double>(pr.flops),
                                                  static_cast<double>(*run.record.executed_flops_per_step), 0));
}

// The whole report from every reported rank's record.
json assemble_report(const run::TrainRecord& rec) {
  const auto& o = rec.request;
  const auto& r = o.config;
  const auto& runs = rec.runs;
  const auto& peak = rec.peak;
  const int64_t peak_devices = rec.peak_devices;
  const auto& l = r.layout;
  json doc = make_report("train");
  doc["env"]["backend"] = o.backend;
  doc["env"]["world"] = l.world();
  doc["env"]["mode"] = rec.mode;
  doc["env"]["device"] = rec.device_description;
  doc["config"] = config_json(r);
  doc["config"]["train"] = {{"steps", o.steps}, {"warmup", o.warmup}};
  doc["params"] = {{"total", analytic::model_params(r.model)}, {"padded_vocab", analytic::padded_vocab(r.model, l.tp)}};

  json checks = json::array();
  doc["ranks"] = json::array();
  std::string status = "ok", error;
  bool status_is_own = false;
  double step_ms = 0, compute_ms = 0, comm_ms = 0;
  int64_t executed_sum = 0;
  for (const auto& run : runs) {
    const bench::TrainRankRecord& r = run.record;
    const int64_t rank = r.analytic.budget.rank;
    json rank_json = train_rank_json(r);
    rank_json["comm_bandwidth"] = comm_bandwidth_json(r.comm, l);
    doc["ranks"].push_back(rank_json);
    for (auto& c : bench::rank_checks(JsonView(rank_json, "this run", fmt::format("ranks[{}]", rank))))
      checks.push_back(c);
    if (!r.executed_same_every_step) checks.push_back(bench::make_check("flops.same_every_step", rank, 0, 1, 0));
    // The report's status is the first failure's own ("oom" on the rank that ran out),
    // not that of a rank that merely did not run because of it ("not run: rank N failed").
    const bool own_failure = r.error.rfind("not run: ", 0) != 0;
    if (r.status != "ok" && (status == "ok" || (own_failure && !status_is_own))) {
      status = r.status;
      status_is_own = own_failure;
      error = fmt::format("rank {}: {}", rank, r.error);
    }
    step_ms = std::max(step_ms, r.median_step_ms);
    compute_ms = std::max(compute_ms, r.median_compute_ms);
    comm_ms = std::max(comm_ms, r.median_comm_ms);
    executed_sum += r.executed_flops_per_step.value_or(0);
  }
  doc["checks"] = checks;

  const auto job = analytic::job_step_flops(r.model, l, r.run);
  const int64_t tokens = r.run.tokens_per_step(l.dp);
  const double s = step_ms / 1e3;
  const double peak_total = peak.flops ? *peak.flops * peak_devices : 0;
  json sum;
  // The loss is the same on every rank (the step all-reduces it); rank 0's is reported.
  sum["loss"] = runs.empty() ? json::array() : json(runs.front().losses);
  sum["steps_completed"] = runs.empty() ? 0 : runs.front().losses.size();
  sum["tokens_per_step"] = tokens;
  sum["median_step_ms"] = step_ms;
  sum["step_split_ms"] = {
      {"compute", compute_ms},
      {"exposed_comm", comm_ms},
      {"pipeline_bubble_estimate", step_ms * analytic::bubble_fraction(l.pp, r.run.microbatches, l.vpp)},
      {"note",
       "the slowest reported rank's medians; exposed comm includes time waiting in "
       "send/recv, where the pipeline bubble shows; the bubble estimate is " +
           std::string(l.vpp > 1 ? "(p−1)/(v·m+p−1) of the step, v = vpp interleaved chunks"
                                 : "(p−1)/(m+p−1) of the step")}};
  sum["tokens_per_s"] = s > 0 ? tokens / s : 0.0;
  sum["model_flops_per_step"] = job.model;
  sum["hardware_flops_per_step"] = job.hardware;
  sum["peak_flops"] = peak.flops ? json(*peak.flops) : json(nullptr);
  sum["peak_devices"] = peak_devices;
  sum["peak_source"] = peak.source;
  // The meta backend runs no op: its step times are bookkeeping, not a measurement,
  // so it reports no MFU of its own (a prediction, below, is its time).
  const bool timed = o.backend != "meta";
  sum["mfu"] = timed && peak.flops && s > 0 ? json(job.model / s / peak_total) : json(nullptr);
  // HFU over the reported ranks' executed FLOPs, scaled to the job when only some were reported.
  const double executed_job = runs.empty() ? 0.0 : static_cast<double>(executed_sum) * l.world() / runs.size();
  sum["hfu"] = timed && peak.flops && s > 0 ? json(executed_job / s / peak_total) : json(nullptr);
  // MFU above 100 % of the measured or the hardware peak is an error, not a result (report/mfu.h).
  const double model_rate = timed && s > 0 ? static_cast<double>(job.model) / s : 0.0;
  put_mfu(sum, "mfu", model_rate, peak.flops ? std::optional<double>(peak_total) : std::nullopt, "measured",
          doc["checks"], "mfu (measured peak)");
  if (!rec.hardware_peak_source.empty()) {
    const auto& hw = rec.hardware_peak_flops;
    sum["hardware_peak_flops"] = hw ? json(*hw) : json(nullptr);
    sum["hardware_peak_source"] = rec.hardware_peak_source;
    if (rec.hardware_peak_cpu) sum["hardware_peak_fma"] = hardware_fma_json(*rec.hardware_peak_cpu);
    put_mfu(sum, "mfu_hardware", model_rate, hw, "hardware", doc["checks"], "mfu (hardware peak)");
  }
  sum["steps"] = train_steps_json(runs, {tokens, static_cast<double>(job.model), executed_job,
                                         peak.flops ? std::optional<double>(peak_total) : std::nullopt, o.warmup});
  doc["summary"] = sum;
  if (status != "ok") {
    doc["status"] = status;
    doc["error"] = error;
  }
  return doc;
}

void add_oom_advice(json& doc, const ResolvedConfig& r, std::optional<int64_t> limit) {
  if (doc["status"] != "oom" || !limit) return;
  int64_t rank = 0;
  for (const auto& rr : doc["ranks"])
    if (rr.value("status", "ok") == "oom") {
      rank = rr["rank"].get<int64_t>();
      break;
    }
  json advice = json::array();
  for (const auto& f : bench::suggest_fits(r.model, r.layout, r.run, rank, *limit))
    advice.push_back({{"change", f.change}, {"total_bytes", f.total_bytes}, {"fits", f.fits}});
  doc["suggestions"] = advice;
}

}  // namespace

json train_report_json(const run::TrainRecord& record) {
  json doc = assemble_report(record);
  const auto& limit = record.request.memory_limit_bytes;
  doc["config"]["memory_limit_bytes"] = limit ? json(*limit) : json(nullptr);
  if (!record.hosts.empty()) doc["env"]["hosts"] = record.hosts;
  if (record.request.backend == "meta")
    doc["summary"]["time_note"] =
        "the meta backend runs no op: step times are bookkeeping, not a measurement; the predicted step "
        "(summary.predicted, with --device-profile or a --device that has a published profile) is its time";
  if (record.prediction) add_prediction(doc, doc["summary"], *record.prediction, record.runs);
  add_oom_advice(doc, record.request.config, limit);
  return doc;
}

json train_abort_report_json(const run::TrainRecord& record) {
  json doc = assemble_report(record);
  add_oom_advice(doc, record.request.config, record.request.memory_limit_bytes);
  return doc;
}

}  // namespace gpuledger::report
