// `gpuledger plan`: the analytic budget per rank role for a model, layout and
// run — bytes by account (exact for this implementation) beside the published
// formulas, communication per step, FLOPs, bubble, time estimates, and whether
// it fits on --device. The options are parsed into a run::PlanRequest; the
// figures come from run::run_plan (bench/run/plan_run.h).
#include <CLI/CLI.hpp>

#include "bench/cli/commands.h"
#include "bench/cli/input_checks.h"
#include "bench/cli/profile_options.h"
#include "bench/report/plan_json.h"
#include "bench/report/plan_tables.h"
#include "bench/report/prediction_table.h"
#include "bench/report/report.h"
#include "bench/run/plan_run.h"

namespace gpuledger::cli {

namespace {

class PlanCommand : public RunCommand {
 public:
  void bind(CLI::App& app) override {
    add_config_options(app, config_, kTrainingConfigOptions);
    app.add_option("--train-tokens", train_tokens_,
                   "token budget for the training-time estimate (default 20 per parameter)")
        ->group("Estimate");
    finite_in(app.add_option("--assumed-mfu", assumed_mfu_, "MFU assumed by the training-time estimate"), 0.01, 1.0)
        ->capture_default_str()
        ->group("Estimate");
    app.add_flag("--brief", brief_,
                 "print the configuration and the summary only (fits per rank class, the tightest rank, step time)")
        ->group("Output");
    add_profile_options(app, profile_options_, "Estimate");
    add_output_options(app, output_);
  }
  OutputOptions& output() override { return output_; }
  void check_inputs() const override {
    check_config_inputs(config_);
    if (!train_tokens_.empty()) check_size_input("train-tokens", train_tokens_);
  }
  void validate() const override { resolve_profile_options(profile_options_, resolve_config(config_), true); }

  int run() const override {
    run::PlanRequest q;
    q.config = resolve_config(config_);
    q.ranks = select_ranks(config_.ranks, q.config.layout, q.config.layout.world());
    if (!train_tokens_.empty()) q.train_tokens = static_cast<double>(parse_size(train_tokens_));
    q.assumed_mfu = assumed_mfu_;
    q.profiles = resolve_profile_options(profile_options_, q.config, /*from_device=*/true);
    const run::PlanRecord rec = run::run_plan(q);
    const auto doc = report::plan_report_json(rec);
    if (!output_.json_path.empty()) report::write_report(doc, output_.json_path);
    if (!output_.quiet)
      report::print_plan(table_stream(output_), doc, brief_ ? report::PlanDetail::kBrief : report::PlanDetail::kFull);
    if (!output_.quiet && !brief_ && rec.prediction) report::print_prediction(table_stream(output_), *rec.prediction);
    return 0;
  }

 private:
  ConfigOptions config_;
  ProfileOptions profile_options_;  // --device-profile, --network-profile
  std::string train_tokens_;        // BYTES-style count (K/M/G…): tokens of the time estimate
  double assumed_mfu_ = 0.5;
  bool brief_ = false;
  OutputOptions output_;
};

}  // namespace

std::unique_ptr<RunCommand> make_plan_command() { return std::make_unique<PlanCommand>(); }

}  // namespace gpuledger::cli
