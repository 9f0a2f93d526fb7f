// `gpuledger train`: real training steps, one line per step (loss, time,
// tokens/s, MFU, HFU, peak bytes), then every reported rank's ledger account
// by account beside the exact budget, the published figures, the comm, and
// the checks. The options are parsed into a run::TrainRequest; the run is
// run::run_train (bench/run/train_run.h, which describes the three modes).
// A failure is a report too (status "oom" or "error", the ledger at the
// failure, what would fit); exit 1.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "bench/cli/checkpoint_options.h"
#include "bench/cli/commands.h"
#include "bench/cli/input_checks.h"
#include "bench/cli/profile_options.h"
#include "bench/exit_codes.h"
#include "bench/report/checks.h"
#include "bench/report/prediction_table.h"
#include "bench/report/report.h"
#include "bench/report/trace_json.h"
#include "bench/report/train_json.h"
#include "bench/report/train_repeats.h"
#include "bench/report/train_tables.h"
#include "bench/run/train_run.h"
#include "core/limits.h"

namespace gpuledger::cli {

using nlohmann::json;

namespace {

class TrainCommand : public RunCommand {
 public:
  void bind(CLI::App& app) override;
  OutputOptions& output() override { return output_; }
  int run() const override;
  void check_inputs() const override;
  void validate() const override;

 private:
  ConfigOptions with_world() const;

  ConfigOptions config_;
  CheckpointOptions checkpoint_;
  std::string backend_ = "cpu";
  int64_t world_ = 0;  // meta: the simulated world (0: dp·tp·pp)
  int64_t steps_ = 10;
  int64_t warmup_ = 1;
  std::string memory_limit_;  // BYTES (K/M/G/Ki/Mi/Gi)
  std::optional<double> peak_flops_;
  std::optional<double> cpu_peak_flops_;  // measured by the sweep running this point
  bool timeline_ = false;
  bool profile_ = false;
  std::string trace_path_;          // --trace FILE.json
  ProfileOptions profile_options_;  // --device-profile, --network-profile
  std::optional<run::PerfProfiles> profiles(const ResolvedConfig& c) const;
  void check_trace_destination() const;
  void check_trace_backend() const;
  void write_trace(const run::TrainRecord& rec) const;
  int64_t repeat_ = 1;         // --repeat: runs of the point in one report (train_repeats.h)
  int64_t repeat_warmup_ = 0;  // --repeat-warmup: whole runs before them, not reported
  OutputOptions output_;
};

void TrainCommand::bind(CLI::App& app) {
  add_config_options(app, config_, kTrainingConfigOptions);
  const char* g = "Train";
  app.add_option("--backend", backend_, "cpu | meta (no memory touched, FLOPs counted) | cuda")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "meta", "cuda"}))
      ->group(g);
  app.add_option("--world", world_, "meta: simulate a world of N ranks (dp = N / (tp·pp) unless --dp is given)")
      ->check(CLI::Range(int64_t{1}, limits::kMaxWorld))
      ->group(g);
  app.add_option("--steps", steps_, "optimizer steps")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))
      ->group(g);
  app.add_option("--warmup", warmup_, "first steps left out of the medians")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30))
      ->group(g);
  app.add_option("--memory-limit", memory_limit_, "behave as a device of BYTES (K/M/G/Ki/Mi/Gi)")->group(g);
  finite_in(app.add_option("--peak-flops", peak_flops_, "the per-device peak MFU is taken against (FLOP/s)"), 1.0, 1e21)
      ->group(g);
  // Hidden: a sweep measures the CPU peak once and hands it to every point
  // (bench/cli/sweep.cpp), so that all points share one MFU denominator.
  finite_in(app.add_option("--cpu-peak-flops", cpu_peak_flops_, "the CPU peak measured by the sweep"), 1.0, 1e21)
      ->group("");
  finite_in(app.add_option("--lr", config_.run.lr, "learning rate"), 0.0, 100.0)->capture_default_str()->group(g);
  finite_in(app.add_option("--weight-decay", config_.run.weight_decay,
                           "weight decay of the matrices (decoupled: adamw, lion; in the gradient: sgd, adagrad)"),
            0.0, 100.0)
      ->capture_default_str()
      ->group(g);
  // Lion's β1 interpolates the sign's argument, β2 decays the momentum; both
  // in [0, 1] as Chen et al. 2023 (Alg. 2) and lion-pytorch take them.
  finite_in(app.add_option("--lion-beta1", config_.run.lion_beta1, "Lion β1"), 0.0, 1.0)
      ->capture_default_str()
      ->group(g);
  finite_in(app.add_option("--lion-beta2", config_.run.lion_beta2, "Lion β2"), 0.0, 1.0)
      ->capture_default_str()
      ->group(g);
  // ε > 0: with ε = 0 a parameter whose gradients have all been 0 divides 0 by 0.
  finite_in(app.add_option("--adagrad-eps", config_.run.adagrad_eps, "Adagrad ε"), 1e-30, 1.0)
      ->capture_default_str()
      ->group(g);
  finite_in(app.add_option("--grad-clip", config_.run.grad_clip, "global gradient-norm clip (0 = off)"), 0.0, 1e9)
      ->capture_default_str()
      ->group(g);
  app.add_flag("--timeline", timeline_, "record memory at every phase marker in the report")->group(g);
  app.add_flag("--profile", profile_, "time every op (synchronised): where the time goes, op by op")->group(g);
  app.add_option("--trace", trace_path_,
                 "write every op and collective of every rank as a Chrome trace (FILE.json: opens in Perfetto or "
                 "chrome://tracing); implies --profile")
      ->group(g);
  add_checkpoint_options(app, checkpoint_, /*training=*/true);
  // The regression gate's repetitions (docs/regress.md).
  add_profile_options(app, profile_options_, g);
  app.add_option("--repeat", repeat_, "run the point N times; the report keeps every run's MFU and tokens/s")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{100}))
      ->group(g);
  app.add_option("--repeat-warmup", repeat_warmup_,
                 "whole runs before the --repeat ones, left out of the report: a process's first run pays its page "
                 "faults and cold caches")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{10}))
      ->group(g);
  add_output_options(app, output_);
}

void TrainCommand::check_inputs() const {
  check_config_inputs(config_);
  if (!memory_limit_.empty()) check_size_input("memory-limit", memory_limit_);
  check_checkpoint_inputs(checkpoint_);
  check_trace_destination();
}

void TrainCommand::validate() const {
  const ResolvedConfig c = resolve_with_checkpoint(with_world(), checkpoint_, backend_, /*training=*/true);
  if (!profiles(c)) check_trace_backend();
}

// The prediction's profiles: named ones on any backend; on meta also the
// published profiles of the --device preset.
std::optional<run::PerfProfiles> TrainCommand::profiles(const ResolvedConfig& c) const {
  return resolve_profile_options(profile_options_, c, /*from_device=*/backend_ == "meta");
}

// --trace names a file that can be written: wrong in itself otherwise.
void TrainCommand::check_trace_destination() const {
  if (trace_path_.empty()) return;
  if (report::is_stdout_path(trace_path_))
    throw ConfigError("trace", "--trace needs a file (stdout carries the tables or the report)");
  if (const auto why = report::report_destination_problem(trace_path_); !why.empty())
    throw ConfigError("trace", "--trace " + trace_path_ + ": " + why);
}

// --trace on meta writes the predicted timeline: without profiles there is none.
void TrainCommand::check_trace_backend() const {
  if (!trace_path_.empty() && backend_ == "meta")
    throw ConfigError("trace",
                      "--trace on the meta backend writes the predicted timeline, and there is no prediction: pass "
                      "--device-profile (or a --device with a published profile), or use --backend cpu or cuda "
                      "for measured time");
}

// Every rank's slices in one Chrome trace (on the rank that has the records:
// rank 0) — measured, or on meta the simulated ranks' predicted timeline.
void TrainCommand::write_trace(const run::TrainRecord& rec) const {
  std::vector<report::RankTrace> ranks;
  if (backend_ == "meta" && rec.prediction) {
    for (const auto& r : rec.prediction->ranks) ranks.push_back({r.rank, r.role, &r.slices, 0});
    report::write_report(
        report::chrome_trace_json(ranks, "gpuledger train, predicted on " + rec.prediction->device_profile + " and " +
                                             rec.prediction->network_profile),
        trace_path_);
    return;
  }
  for (const auto& r : rec.runs)
    ranks.push_back({r.record.analytic.budget.rank, r.record.analytic.role, &r.record.trace, r.record.trace_dropped});
  report::write_report(report::chrome_trace_json(ranks, "gpuledger train, " + rec.mode), trace_path_);
}

// --world N: the layout's world, dp filled in from N when only tp, pp (and cp) are given.
ConfigOptions TrainCommand::with_world() const {
  ConfigOptions c = config_;
  if (world_ <= 0) return c;
  if (backend_ != "meta") throw ConfigError("world", "--world simulates ranks: it needs --backend meta");
  const int64_t tp_pp_cp = c.layout.tp * c.layout.pp * c.layout.cp;
  if (c.layout.dp == 1 && world_ != tp_pp_cp) {
    if (world_ % tp_pp_cp != 0)
      throw LayoutError(fmt::format("--world {} is not a multiple of --tp × --pp × --cp = {}", world_, tp_pp_cp));
    c.layout.dp = world_ / tp_pp_cp;
  } else if (world_ != c.layout.world()) {
    throw LayoutError(fmt::format("--world {} but dp·tp·pp·cp = {}", world_, c.layout.world()));
  }
  return c;
}

int TrainCommand::run() const {
  check_trace_destination();
  run::TrainRequest q;
  q.config = resolve_with_checkpoint(with_world(), checkpoint_, backend_, /*training=*/true);
  q.profiles = profiles(q.config);
  if (!q.profiles) check_trace_backend();
  q.save_weights = checkpoint_.save_weights;
  const Layout& l = q.config.layout;
  if (backend_ == "meta" && l.world() > 1) q.simulated_ranks = select_ranks(config_.ranks, l, l.world());
  q.backend = backend_;
  q.steps = steps_;
  q.warmup = warmup_;
  q.memory_limit_bytes = memory_limit_.empty() ? q.config.device_memory_bytes : parse_size(memory_limit_);
  q.peak_flops = peak_flops_;
  q.cpu_peak_flops = cpu_peak_flops_;
  q.timeline = timeline_;
  // --trace: measured slices, or on meta the prediction's simulated timeline.
  q.trace = !trace_path_.empty() && backend_ != "meta";
  q.profile = profile_ || q.trace;
  q.predicted_trace = !trace_path_.empty() && backend_ == "meta";

  run::TrainProgress progress;
  if (!output_.quiet) progress.os = &table_stream(output_);
  progress.report_path = output_.json_path;
  const std::string path = output_.json_path;
  progress.write_before_abort = [path](const run::TrainRecord& rec) {
    if (!path.empty() && !report::is_stdout_path(path))
      report::write_report(report::train_abort_report_json(rec), path);
  };
  // Every MPI rank runs every repetition; ranks other than 0 write no report.
  std::vector<json> runs;
  std::optional<run::StepPrediction> prediction;  // the last run's (the same every time)
  std::optional<int> quiet_exit;
  for (int64_t i = 0; i < repeat_warmup_ + repeat_; ++i) {
    const run::TrainRecord rec = run::run_train(q, progress);
    if (rec.exit_without_report) {
      quiet_exit = *rec.exit_without_report;
      if (*quiet_exit != kExitOk) return *quiet_exit;
      continue;
    }
    if (!trace_path_.empty()) write_trace(rec);  // every repetition's, the last run's left
    prediction = rec.prediction;
    json doc = report::train_report_json(rec);
    const bool failed = doc["status"] != "ok";
    if (i >= repeat_warmup_ || failed) runs.push_back(std::move(doc));
    if (failed) break;
    // Later repetitions take the first one's measured CPU peak: a peak measured
    // again each time would add its own noise to every repetition's MFU.
    if (backend_ == "cpu" && !q.peak_flops && !q.cpu_peak_flops && rec.peak.flops) {
      q.cpu_peak_flops = rec.peak.flops;
      q.cpu_peak_source = rec.peak.source + " (measured once, for every repetition)";
    }
  }
  if (quiet_exit) return *quiet_exit;
  const json doc = report::combine_repeats(runs);
  if (!output_.json_path.empty()) report::write_report(doc, output_.json_path);
  if (!output_.quiet) report::print_train_summary(table_stream(output_), doc);
  if (prediction && !output_.quiet) report::print_prediction(table_stream(output_), *prediction);
  return run_report_exit_status(doc, "train");
}

}  // namespace

std::unique_ptr<RunCommand> make_train_command() { return std::make_unique<TrainCommand>(); }

}  // namespace gpuledger::cli
