// `gpuledger train`: real training steps, one line per step (loss, time,
// tokens/s, MFU, HFU, peak bytes), then every reported rank's ledger account
// by account beside the exact budget, the published figures, the comm, and
// the checks. Three modes, one per-rank runner (bench/train_runner.h):
//   one rank                      gpuledger train …
//   an MPI job, one rank each     mpirun -np N gpuledger train --dp … --tp … --pp …
//   a meta simulation             gpuledger train --backend meta --world W --ranks roles|all|LIST
// A failure is a report too (status "oom" or "error", the ledger at the failure,
// what would fit); exit 1. Under MPI a failure before the first step is agreed
// by every rank and reported by rank 0; a failure inside a step (when peers are
// already waiting in a collective) makes the failing rank write the report and
// abort the job, so that no rank hangs.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <set>

#include "bench/checks.h"
#include "kernels/registry/registry.h"
#include "bench/cli/commands.h"
#include "bench/cli/plan_report.h"
#include "bench/cli/train_report.h"
#include "bench/exit_codes.h"
#include "bench/oom_advice.h"
#include "bench/peak.h"
#include "bench/report/format.h"
#include "bench/report/report.h"
#include "bench/train_runner.h"
#include "kernels/profiling_device.h"
#include "analytic/budget.h"
#include "core/device_spec.h"
#include "analytic/params.h"
#include "analytic/pipeline.h"
#include "parallel/groups.h"
#if GPULEDGER_HAVE_MPI
#include "comm/mpi_check.h"
#include "comm/mpi_runtime.h"
#endif

namespace gpuledger::cli {

using nlohmann::json;

namespace {

struct TrainOptions {
  Options common;
  std::string backend = "cpu";
  int64_t steps = 10;
  int64_t warmup = 1;
  std::string memory_limit;
  std::optional<double> peak_flops;
  bool timeline = false;
  bool profile = false;
};

// The rank's device, wrapped to time every op under --profile.
std::unique_ptr<Device> make_rank_device(const TrainOptions& o, Ledger& ledger, int local_rank) {
  auto dev = make_device(o.backend, ledger, local_rank);
  if (o.profile) return std::make_unique<ProfilingDevice>(std::move(dev));
  return dev;
}

// The peak MFU is taken against: --peak-flops, the device's datasheet, or (cpu)
// an sgemm measured now, in this session, on a device of its own so that the
// run's ledger and FLOP counter never see it. `devices` is how many such peaks
// the job has: every rank for a GPU, every node for the CPU (ranks on a node
// share its cores).
struct Peak {
  std::optional<double> flops;
  std::string source;
};

Peak resolve_peak(const TrainOptions& o, const Resolved& r, const std::string& backend) {
  if (o.peak_flops) return {*o.peak_flops, "--peak-flops"};
  if (r.device) {
    auto p = device_peak_flops(*r.device, r.run.dtype);
    if (p) return {p, r.device->name + " datasheet (" + r.device->source + ")"};
  }
  if (backend == "cpu") {
    const auto p = bench::measure_cpu_session_peak();
    return {p.flops_per_s, p.source};
  }
  return {std::nullopt, "unknown: no datasheet peak for this device (pass --peak-flops or --device)"};
}

bool launched_by_mpirun() {
  for (auto v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_PROCID"})
    if (std::getenv(v)) return true;
  return false;
}

std::optional<int64_t> memory_limit(const TrainOptions& o, const Resolved& r) {
  if (!o.memory_limit.empty()) return parse_size(o.memory_limit);
  return r.device_memory_bytes;
}

// One line per step on the printing rank. MFU: the job's model FLOPs; HFU: the
// job's hardware FLOPs (analytic — the checks show every rank executes exactly
// its share), both over the step time and the job's peak.
void print_step(std::ostream& os, int64_t step, const StepResult& s, const Ledger& ledger, int64_t tokens_per_step,
                const analytic::JobFlops& job, double peak_total, bool have_peak) {
  const double tps = s.seconds > 0 ? tokens_per_step / s.seconds : 0;
  std::string mfu = "-", hfu = "-";
  if (have_peak && s.seconds > 0) {
    mfu = report::format_percent(job.model / s.seconds / peak_total);
    hfu = report::format_percent(job.hardware / s.seconds / peak_total);
  }
  os << fmt::format("  {:>5} {:>10.5f} {:>10.2f} {:>12.1f} {:>7} {:>7} {:>12}\n", step, s.loss, s.seconds * 1e3, tps,
                    mfu, hfu, report::format_bytes(static_cast<double>(ledger.peak_total()))) << std::flush;
}

// The whole report from every reported rank's record.
json assemble_report(const TrainOptions& o, const Resolved& r, const std::vector<bench::RankRun>& runs,
                     const Peak& peak, int64_t peak_devices, const std::string& device_desc, const std::string& mode) {
  const auto& l = r.layout;
  json doc = report::make_report("train");
  doc["env"]["backend"] = o.backend;
  doc["env"]["world"] = l.world();
  doc["env"]["mode"] = mode;
  doc["env"]["device"] = device_desc;
  doc["config"] = report::config_json(r);
  doc["config"]["train"] = {{"steps", o.steps}, {"warmup", o.warmup}};
  doc["params"] = {{"total", analytic::model_params(r.model)}, {"padded_vocab", analytic::padded_vocab(r.model, l.tp)}};

  json checks = json::array();
  doc["ranks"] = json::array();
  std::string status = "ok", error;
  bool status_is_own = false;
  double step_ms = 0, compute_ms = 0, comm_ms = 0;
  int64_t executed_sum = 0;
  for (const auto& run : runs) {
    doc["ranks"].push_back(run.record);
    for (auto& c : bench::rank_checks(run.record)) checks.push_back(c);
    if (!run.record["flops"].value("executed_same_every_step", true))
      checks.push_back(bench::make_check("flops.same_every_step", run.record["rank"].get<int64_t>(), 0, 1, 0));
    // The report's status is the first failure's own ("oom" on the rank that ran out),
    // not that of a rank that merely did not run because of it ("not run: rank N failed").
    const bool own_failure = run.error.rfind("not run: ", 0) != 0;
    if (run.status != "ok" && (status == "ok" || (own_failure && !status_is_own))) {
      status = run.status;
      status_is_own = own_failure;
      error = fmt::format("rank {}: {}", run.record["rank"].get<int64_t>(), run.error);
    }
    step_ms = std::max(step_ms, run.record["time"]["median_step_ms"].get<double>());
    compute_ms = std::max(compute_ms, run.record["time"]["median_compute_ms"].get<double>());
    comm_ms = std::max(comm_ms, run.record["time"]["median_comm_ms"].get<double>());
    executed_sum += run.record["flops"].value("executed_per_step", int64_t{0});
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
  sum["step_split_ms"] = {{"compute", compute_ms},
                          {"exposed_comm", comm_ms},
                          {"pipeline_bubble_estimate", step_ms * analytic::bubble_fraction(l.pp, r.run.microbatches)},
                          {"note", "the slowest reported rank's medians; exposed comm includes time waiting in "
                                   "send/recv, where the pipeline bubble shows; the bubble estimate is "
                                   "(p−1)/(m+p−1) of the step"}};
  sum["tokens_per_s"] = s > 0 ? tokens / s : 0.0;
  sum["model_flops_per_step"] = job.model;
  sum["hardware_flops_per_step"] = job.hardware;
  sum["peak_flops"] = peak.flops ? json(*peak.flops) : json(nullptr);
  sum["peak_devices"] = peak_devices;
  sum["peak_source"] = peak.source;
  sum["mfu"] = peak.flops && s > 0 ? json(job.model / s / peak_total) : json(nullptr);
  // HFU over the reported ranks' executed FLOPs, scaled to the job when only some were reported.
  const double executed_job = runs.empty() ? 0.0 : static_cast<double>(executed_sum) * l.world() / runs.size();
  sum["hfu"] = peak.flops && s > 0 ? json(executed_job / s / peak_total) : json(nullptr);
  doc["summary"] = sum;
  if (status != "ok") {
    doc["status"] = status;
    doc["error"] = error;
  }
  return doc;
}

void add_oom_advice(json& doc, const Resolved& r, std::optional<int64_t> limit) {
  if (doc["status"] != "oom" || !limit) return;
  int64_t rank = 0;
  for (const auto& rr : doc["ranks"])
    if (rr.value("status", "ok") == "oom") { rank = rr["rank"].get<int64_t>(); break; }
  json advice = json::array();
  for (const auto& f : bench::suggest_fits(r.model, r.layout, r.run, rank, *limit))
    advice.push_back({{"change", f.change}, {"total_bytes", f.total_bytes}, {"fits", f.fits}});
  doc["suggestions"] = advice;
}

int finish(const TrainOptions& o, json& doc, bool print) {
  if (!o.common.json_path.empty()) report::write_report(doc, o.common.json_path);
  if (print && !o.common.quiet) print_train_summary(table_stream(o.common), doc);
  if (doc["status"] != "ok") return kExitFailed;
  return bench::all_ok(doc["checks"]) ? kExitOk : kExitFailed;
}

void print_header(std::ostream& os, const TrainOptions& o, const Resolved& r, const std::string& desc,
                  const std::string& mode, std::optional<int64_t> limit, const Peak& peak) {
  json head = report::make_report("train");
  head["config"] = report::config_json(r);
  head["params"] = {{"total", analytic::model_params(r.model)}, {"padded_vocab", analytic::padded_vocab(r.model, r.layout.tp)}};
  print_config_header(os, head);
  os << fmt::format("# backend {} ({}), {}, steps {} (first {} left out of medians), memory limit {}\n", o.backend,
                    desc, mode, o.steps, o.warmup,
                    limit ? report::format_bytes(static_cast<double>(*limit)) : std::string("none"));
  os << fmt::format("# peak    {} — {}\n", report::format_optional_si(peak.flops, "FLOP/s"), peak.source);
  os << fmt::format("# {:>5} {:>10} {:>10} {:>12} {:>7} {:>7} {:>12}\n", "step", "loss", "ms", "tokens/s", "MFU", "HFU",
                    "peak bytes");
}

bench::RankRunOptions runner_options(const TrainOptions& o) {
  bench::RankRunOptions ro;
  ro.steps = o.steps;
  ro.warmup = o.warmup;
  ro.timeline = o.timeline;
  return ro;
}

// ---- one rank, or simulated ranks of a meta world, in this process ----
int run_local(TrainOptions& o, const Resolved& r, bool simulate) {
  const auto& l = r.layout;
  const auto limit = memory_limit(o, r);
  const std::vector<int64_t> ranks = simulate ? select_ranks(o.common.ranks, l, l.world()) : std::vector<int64_t>{0};
  Ledger probe_ledger;
  const std::string desc = make_device(o.backend, probe_ledger)->description();
  const Peak peak = resolve_peak(o, r, o.backend);
  const int64_t peak_devices = 1;  // one process: one CPU node, or the one simulated device's peak × world below
  const int64_t devices = simulate ? l.world() : peak_devices;
  const std::string mode = simulate ? fmt::format("meta simulation of {} of {} ranks", ranks.size(), l.world())
                                    : "one rank";
  std::ostream& os = table_stream(o.common);
  if (!o.common.quiet) print_header(os, o, r, desc, mode, limit, peak);
  const auto job = analytic::job_step_flops(r.model, l, r.run);

  std::vector<bench::RankRun> runs;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const int64_t rank = ranks[i];
    Ledger ledger(limit);
    auto dev = make_rank_device(o, ledger, 0);
    CommCounters counters;
    Groups groups = simulate ? make_sim_groups(l, rank, counters, *dev, r.model.tied_embeddings)
                             : make_single_groups(counters, *dev);
    auto ro = runner_options(o);
    if (i == 0 && !o.common.quiet)
      ro.on_step = [&](int64_t step, const StepResult& s, const Ledger& lg) {
        print_step(os, step, s, lg, r.run.tokens_per_step(l.dp), job, peak.flops ? *peak.flops * devices : 0,
                   peak.flops.has_value());
      };
    runs.push_back(bench::run_rank_training(*dev, r, groups.context(), counters, ro, plan_rank_json(r, rank, limit)));
  }
  json doc = assemble_report(o, r, runs, peak, devices, desc, mode);
  doc["config"]["memory_limit_bytes"] = limit ? json(*limit) : json(nullptr);
  add_oom_advice(doc, r, limit);
  return finish(o, doc, true);
}

#if GPULEDGER_HAVE_MPI
// ---- one rank of an MPI job ----
int run_mpi(TrainOptions& o, const Resolved& r) {
  MpiRuntime mpi;
  const auto& l = r.layout;
  const int64_t rank = mpi.world_rank();
  const auto limit = memory_limit(o, r);
  Ledger ledger(limit);
  auto dev = make_rank_device(o, ledger, static_cast<int>(rank));
  const std::string desc = dev->description();
  // Rank 0 measures the peak (the others wait in the agreement below), then shares it.
  Peak peak;
  if (rank == 0) peak = resolve_peak(o, r, o.backend);
  double peak_value = peak.flops.value_or(-1.0);
  MPI_CHECK(MPI_Bcast(&peak_value, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD), "sharing the measured peak");
  if (rank != 0) peak.flops = peak_value > 0 ? std::optional<double>(peak_value) : std::nullopt;
  // Devices whose peaks add up: every rank on a GPU; every node on the CPU.
  auto hosts = gather_strings(mpi.hostname());
  int64_t nodes = std::set<std::string>(hosts.begin(), hosts.end()).size();
  MPI_CHECK(MPI_Bcast(&nodes, 1, MPI_INT64_T, 0, MPI_COMM_WORLD), "sharing the node count");
  const int64_t devices = o.backend == "cpu" && !o.peak_flops ? nodes : l.world();

  CommCounters counters;
  std::optional<Groups> groups;
  std::string setup_error;
  try {
    groups.emplace(make_mpi_groups(l, counters, *dev, r.model.tied_embeddings, comm_backend_for(o.backend)));  // cuda: NCCL
  } catch (const std::exception& e) {
    setup_error = e.what();
  }
  const auto agreed = agree_status(setup_error.empty(), setup_error);
  if (!agreed.all_ok) {
    if (rank == 0) std::cerr << "gpuledger train: error on rank " << agreed.first_failed_rank << ": " << agreed.error << "\n";
    return kExitUsage;
  }

  std::ostream& os = table_stream(o.common);
  const std::string mode = fmt::format("MPI, {} ranks on {} node(s)", l.world(), nodes);
  if (rank == 0 && !o.common.quiet) print_header(os, o, r, desc, mode, limit, peak);
  const auto job = analytic::job_step_flops(r.model, l, r.run);
  auto ro = runner_options(o);
  ro.agree_after_setup = [](bool ok, const std::string& error) {
    const auto a = agree_status(ok, error);
    return a.all_ok ? std::string() : fmt::format("rank {} failed: {}", a.first_failed_rank, a.error);
  };
  if (rank == 0 && !o.common.quiet)
    ro.on_step = [&](int64_t step, const StepResult& s, const Ledger& lg) {
      print_step(os, step, s, lg, r.run.tokens_per_step(l.dp), job, peak.flops ? *peak.flops * devices : 0,
                 peak.flops.has_value());
    };
  bench::RankRun run = bench::run_rank_training(*dev, r, groups->context(), counters, ro, plan_rank_json(r, rank, limit));
  if (run.failed_in_step && l.world() > 1) {
    // Failed inside a step: peers may be waiting in a collective this rank will
    // never enter. Write what this rank knows and end the job (no hang).
    json doc = assemble_report(o, r, {run}, peak, devices, desc, mode);
    add_oom_advice(doc, r, limit);
    std::cerr << fmt::format("gpuledger train: rank {} failed during step {}: {} — aborting all ranks "
                             "(its report: {})\n", rank, run.losses.size(), run.error,
                             o.common.json_path.empty() ? "not requested" : o.common.json_path);
    if (!o.common.json_path.empty() && o.common.json_path != "-") report::write_report(doc, o.common.json_path);
    MPI_Abort(MPI_COMM_WORLD, kExitFailed);
  }
  // Everyone reached here: failures (if any) happened before the first collective
  // of a step on every rank that failed; gather every record on rank 0.
  const auto records = gather_strings(run.record.dump());
  const auto losses = gather_strings(json(run.losses).dump());
  if (rank != 0) return agree_status(run.status == "ok", run.error).all_ok ? kExitOk : kExitFailed;
  std::vector<bench::RankRun> runs;
  for (size_t i = 0; i < records.size(); ++i) {
    bench::RankRun rr;
    rr.record = json::parse(records[i]);
    rr.losses = json::parse(losses[i]).get<std::vector<double>>();
    rr.status = rr.record.value("status", "ok");
    rr.error = rr.record.value("error", "");
    runs.push_back(std::move(rr));
  }
  json doc = assemble_report(o, r, runs, peak, devices, desc, mode);
  doc["config"]["memory_limit_bytes"] = limit ? json(*limit) : json(nullptr);
  doc["env"]["hosts"] = hosts;
  add_oom_advice(doc, r, limit);
  const int code = finish(o, doc, true);
  agree_status(run.status == "ok", run.error);
  return code;
}
#endif

int run_train(TrainOptions& o, int64_t world_opt) {
  if (world_opt > 0) {
    if (o.backend != "meta") throw ConfigError("world", "--world simulates ranks: it needs --backend meta");
    const int64_t tp_pp = o.common.layout.tp * o.common.layout.pp;
    if (o.common.layout.dp == 1 && world_opt != tp_pp) {
      if (world_opt % tp_pp != 0)
        throw LayoutError(fmt::format("--world {} is not a multiple of --tp × --pp = {}", world_opt, tp_pp));
      o.common.layout.dp = world_opt / tp_pp;
    } else if (world_opt != o.common.layout.world()) {
      throw LayoutError(fmt::format("--world {} but dp·tp·pp = {}", world_opt, o.common.layout.world()));
    }
  }
  const Resolved r = resolve(o.common);
  if (o.backend == "meta" && r.layout.world() > 1) return run_local(o, r, /*simulate=*/true);
  if (r.layout.world() > 1 || launched_by_mpirun()) {
#if GPULEDGER_HAVE_MPI
    return run_mpi(o, r);
#else
    throw LayoutError(fmt::format("a layout of {} ranks needs MPI, and this binary was built without it "
                                  "(-DGPULEDGER_MPI=OFF); use --backend meta to simulate it", r.layout.world()));
#endif
  }
  return run_local(o, r, /*simulate=*/false);
}

}  // namespace

void add_train_command(CLI::App& root, std::vector<Command>& out) {
  auto o = std::make_shared<TrainOptions>();  // CLI11 binds to it; the run closure keeps it alive
  auto world = std::make_shared<int64_t>(0);
  auto* app = root.add_subcommand("train", "run training steps; every rank's ledger by account beside the exact budget");
  add_model_options(*app, o->common);
  add_layout_options(*app, o->common);
  add_run_options(*app, o->common);
  add_device_options(*app, o->common);
  const char* g = "Train";
  app->add_option("--backend", o->backend, "cpu | meta (no memory touched, FLOPs counted) | cuda")
      ->capture_default_str()->check(CLI::IsMember({"cpu", "meta", "cuda"}))->group(g);
  app->add_option("--world", *world, "meta: simulate a world of N ranks (dp = N / (tp·pp) unless --dp is given)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))->group(g);
  app->add_option("--steps", o->steps, "optimizer steps")->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))->group(g);
  app->add_option("--warmup", o->warmup, "first steps left out of the medians")->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30))->group(g);
  app->add_option("--memory-limit", o->memory_limit, "behave as a device of BYTES (K/M/G/Ki/Mi/Gi)")->group(g);
  app->add_option("--peak-flops", o->peak_flops, "the per-device peak MFU is taken against (FLOP/s)")->group(g);
  app->add_option("--lr", o->common.run.lr, "AdamW learning rate")->capture_default_str()->group(g);
  app->add_option("--weight-decay", o->common.run.weight_decay, "AdamW decoupled weight decay")
      ->capture_default_str()->group(g);
  app->add_option("--grad-clip", o->common.run.grad_clip, "global gradient-norm clip (0 = off)")
      ->capture_default_str()->group(g);
  app->add_flag("--timeline", o->timeline, "record memory at every phase marker in the report")->group(g);
  app->add_flag("--profile", o->profile, "time every op (synchronised): where the time goes, op by op")->group(g);
  add_output_options(*app, o->common);
  out.push_back({app, [o, world]() { return run_train(*o, *world); }});
}

}  // namespace gpuledger::cli
