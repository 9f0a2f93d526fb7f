// `gpuledger sweep`: a grid of points, one report per point (docs/sweep.md;
// on a cluster, docs/cluster.md).
//
//   mpirun -np 4 gpuledger sweep train --model tiny-llama --steps 3
//       --grid layout=auto --grid zero=0,1,2,3 --grid recompute=none,selective,full --out DIR
//
// The subcommand's options are parsed once from the fixed arguments and every
// point's grid values are set on them by name, through each option's own
// conversion and checks (sweep_plan.h): usage errors end the sweep (exit 2)
// before anything runs, and a point the subcommand refuses — a layout that
// does not divide, a refused combination, more ranks than the sweep has — is
// "skipped" with the reason, never run and never a failure.
//
// Each point that runs is a child process: `gpuledger <subcommand> <point's
// options> --json DIR/<point>.json`, a fresh MPI job of its own under the
// launcher when it has more than one rank (sweep_launch.h). An out-of-memory
// on one rank, an abort or a crash ends that job only: the point keeps the
// report its failing rank wrote (or the sweep writes a minimal one) and the
// sweep goes on; the next point's job has communicators of its own. Under
// `mpirun -np N` (or srun) only rank 0 is the sweep: the other ranks leave at
// once, so that the points' jobs have the cores, and N is the world
// layout=auto factorises and the most ranks a point may have.
//
// Only rank 0 writes, every file whole (a temporary name, then rename). A
// point's index entry is written last (sweep_store.h), so --resume reruns
// exactly the points a kill cut short; --point N (or SLURM_ARRAY_TASK_ID) runs
// one point of a job array into the shared folder, and --merge DIR builds the
// index from it. A point's input that is wrong in itself (an unknown preset,
// a malformed model file, a bad size) is a usage error naming the point, found
// before any point runs (input_checks.h): only a combination the subcommand
// refuses is skipped. Exit 0 when every point is ok or skipped and one ran, 1
// when one failed (or its checks did) or is missing, 2 on usage errors and when
// no point could run (every one skipped: sweep_store.h index_exit_status).
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/cli/commands.h"
#include "bench/cli/sweep_launch.h"
#include "bench/cli/sweep_plan.h"
#include "bench/cli/sweep_store.h"
#include "bench/exit_codes.h"
#include "bench/peak.h"
#include "bench/report/report.h"
#include "bench/report/report_reader.h"
#include "bench/report/sweep_index.h"

namespace gpuledger::cli {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

std::string format_duration(double seconds) {
  const auto s = static_cast<int64_t>(seconds + 0.5);
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
}

// What one run of the sweep does and has done.
struct SweepRun {
  SweepRun(const SweepOptions& options, SweepPlan& plan_) : o(options), s(plan_) {}
  const SweepOptions& o;
  SweepPlan& s;
  json plan;                                     // DIR/sweep.plan.json
  std::vector<size_t> selected;                  // the points this run handles
  std::vector<std::optional<std::string>> skip;  // per point of the plan
  std::optional<double> cpu_peak_flops;          // measured once, at the first train point on the cpu
  Clock::time_point start = Clock::now();
  double ran_seconds = 0;
  int64_t ran = 0, to_run = 0, failed = 0;
};

// train on the cpu without --peak-flops or a --device datasheet: every point
// takes MFU against one CPU peak, measured here once (bench/peak.h) and kept in
// DIR/sweep.peak.json, which a --resume or a job array's --point reuses, so
// that a sweep finished in several runs still has one denominator.
std::vector<std::string> peak_args(SweepRun& r) {
  if (r.o.sub != "train" || option_text(*r.s.app, "--backend") != "cpu") return {};
  if (r.s.app->get_option("--peak-flops")->count() > 0 || !option_text(*r.s.app, "--device").empty()) return {};
  const std::string kept = (fs::path(r.o.out) / "sweep.peak.json").string();
  if (!r.cpu_peak_flops && (r.o.resume || r.o.point || std::getenv("SLURM_ARRAY_TASK_ID")) && fs::exists(kept))
    r.cpu_peak_flops = report::read_json_file(kept).value("cpu_peak_flops", 0.0);
  if (!r.cpu_peak_flops || *r.cpu_peak_flops <= 0) {
    std::cerr << "measuring the CPU peak once for every point ... " << std::flush;
    // The sweep's --dtype (every point shares it): bf16 may have a faster GEMM of its own (bench/peak.h).
    const std::string dt = option_text(*r.s.app, "--dtype");
    const auto peak =
        bench::measure_cpu_session_peak(dt.empty() ? DType::kFP32 : dtype_from_name(dt).value_or(DType::kFP32));
    r.cpu_peak_flops = peak.flops_per_s;
    report::write_report({{"cpu_peak_flops", peak.flops_per_s}, {"source", peak.source}}, kept);
    std::cerr << fmt::format("{:.3g} FLOP/s\n", *r.cpu_peak_flops);
  }
  return {"--cpu-peak-flops", fmt::format("{:.17g}", *r.cpu_peak_flops)};
}

// Runs point i as a child job and writes its report (when the child wrote none)
// and its entry; returns the entry.
json run_one(SweepRun& r, size_t i) {
  const Point& p = r.s.points[i];
  const std::string report_path = point_file(r.o.out, p.name, ".json");
  const std::string log_path = point_file(r.o.out, p.name, ".log");
  apply_point(*r.s.app, p);
  std::vector<std::string> args = {r.o.sub};
  args.insert(args.end(), p.args.begin(), p.args.end());
  for (const auto& a : peak_args(r)) args.push_back(a);
  args.insert(args.end(), {"--json", report_path});
  if (!r.o.tables) args.push_back("--quiet");
  const auto argv = child_command(r.o.launcher.empty() ? default_launcher() : r.o.launcher, point_ranks(r.s, r.o.sub),
                                  self_exe(), args);
  const auto t0 = Clock::now();
  const ChildExit c = run_child(argv, log_path);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  fs::remove(report_path + ".failed-rank");  // train's marker of which rank wrote the report (train_mpi.cpp)
  if (r.o.tables) std::cout << std::ifstream(log_path).rdbuf() << std::flush;
  if (c.interrupted) return nullptr;
  json entry;
  if (c.exit == kExitUsage && !fs::exists(report_path)) {
    entry = skipped_entry(p, static_cast<int64_t>(i), c.last_line);  // refused by the subcommand itself
  } else {
    json doc;
    if (fs::exists(report_path)) {
      doc = report::read_report(report_path);
    } else {  // the job ended before any rank wrote (a crash, a kill): the sweep says what it saw
      doc = report::make_report(r.o.sub);
      doc["status"] = "error";
      doc["error"] = fmt::format("exited {} without a report{}", c.exit, c.last_line.empty() ? "" : ": " + c.last_line);
      doc["exit"] = c.exit;
      doc["config"] = {{"args", p.args}};
      report::write_report(doc, report_path);
    }
    entry = ran_entry(r.o.sub, p, static_cast<int64_t>(i), doc, c.exit, seconds, c.last_line);
  }
  report::write_report(entry, point_file(r.o.out, p.name, ".point.json"));
  return entry;
}

void print_progress(SweepRun& r, size_t k, const Point& p, const json& entry, double seconds) {
  const std::string status = entry["status"];
  const double elapsed = std::chrono::duration<double>(Clock::now() - r.start).count();
  const int64_t left = r.to_run - r.ran;
  const std::string eta = r.ran > 0 ? format_duration(r.ran_seconds / static_cast<double>(r.ran) * left) : "?";
  std::string why;
  if (status == "skipped") why = ": " + entry["reason"].get<std::string>();
  if (status != "ok" && status != "skipped") why = ": " + entry.value("error", std::string());
  std::cerr << fmt::format("[{}/{}] {} ... {} ({:.1f} s){} | elapsed {}, {} to run, ETA {}\n", k + 1, r.selected.size(),
                           point_text(p), status, seconds, why, format_duration(elapsed), left, eta)
            << std::flush;
}

// Returns false when the sweep was interrupted.
bool run_points(SweepRun& r) {
  const bool whole = r.selected.size() == r.s.points.size();
  for (size_t k = 0; k < r.selected.size(); ++k) {
    const size_t i = r.selected[k];
    const Point& p = r.s.points[i];
    if (r.o.resume && !resumable_entry(r.o.out, p).is_null()) continue;
    for (const char* suffix : {".point.json", ".json", ".log"}) fs::remove(point_file(r.o.out, p.name, suffix));
    if (r.skip[i]) {
      report::write_report(skipped_entry(p, static_cast<int64_t>(i), *r.skip[i]),
                           point_file(r.o.out, p.name, ".point.json"));
      continue;  // counted in the summary line before the first point
    }
    const auto t0 = Clock::now();
    const json entry = run_one(r, i);
    if (entry.is_null()) return false;
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    ++r.ran;
    r.ran_seconds += seconds;
    if (entry["status"] != "ok" && entry["status"] != "skipped") ++r.failed;
    print_progress(r, k, p, entry, seconds);
    // Rewritten after every point: a stopped sweep leaves an index of what it finished.
    if (whole) write_index(r.o.out, build_index(r.o.out, r.plan));
  }
  return true;
}

// --point N, else SLURM_ARRAY_TASK_ID (one point per task of a job array), else all.
std::vector<size_t> select_points(const SweepOptions& o, size_t n) {
  std::optional<int64_t> one = o.point;
  if (!one && !o.list)
    if (const char* task = std::getenv("SLURM_ARRAY_TASK_ID")) {
      const std::string t(task);
      if (t.empty() || t.find_first_not_of("0123456789") != std::string::npos)
        throw SweepUsage("SLURM_ARRAY_TASK_ID=" + t + " is not a point index");
      one = std::stoll(t);
    }
  std::vector<size_t> all;
  if (one) {
    if (*one < 0 || *one >= static_cast<int64_t>(n))
      throw SweepUsage(fmt::format("point {} does not exist: the sweep has points 0 to {} (--list)", *one, n - 1));
    return {static_cast<size_t>(*one)};
  }
  for (size_t i = 0; i < n; ++i) all.push_back(i);
  return all;
}

void print_list(const SweepRun& r) {
  int64_t runnable = 0;
  for (size_t i = 0; i < r.s.points.size(); ++i) {
    const auto& why = r.skip[i];
    runnable += why ? 0 : 1;
    std::cout << fmt::format("{:>4}  {:<40} {}\n", i, r.s.points[i].name, why ? "skipped: " + *why : "runs");
  }
  for (const auto& [c, why] : r.s.refused_layouts)
    std::cout << fmt::format("layout=auto leaves out dp {} tp {} pp {}: {}\n", c.dp, c.tp, c.pp, why);
  std::cout << fmt::format("{} points, {} run, {} skipped (a job array: --array=0-{})\n", r.s.points.size(), runnable,
                           r.s.points.size() - static_cast<size_t>(runnable), r.s.points.size() - 1);
}

// index_exit_status, saying on stderr why when no point ran.
int exit_status_saying_why(const json& index, const std::string& dir) {
  const int status = index_exit_status(index);
  if (status == kExitUsage)
    std::cerr << "gpuledger sweep: error: no point ran: the subcommand refused every one (the reasons: "
              << (fs::path(dir) / "sweep.json").string() << ")\n";
  return status;
}

int merge_folder(const std::string& dir) {
  const std::string plan_path = (fs::path(dir) / "sweep.plan.json").string();
  if (!fs::exists(plan_path)) {
    std::cerr << "gpuledger sweep: error: --merge " << dir << ": no sweep.plan.json (not a sweep's folder)\n";
    return kExitUsage;
  }
  const json plan = report::read_json_file(plan_path);
  const json index = build_index(dir, plan);
  write_index(dir, index);
  report::print_sweep_table(std::cout, plan["kind"].get<std::string>(), index);
  return exit_status_saying_why(index, dir);
}

int run_sweep(const SweepOptions& o, const std::vector<std::string>& fixed) {
  if (!o.merge.empty()) return merge_folder(o.merge);
  // Under a launcher only rank 0 is the sweep; the others leave the cores to the points' jobs.
  if (launcher_rank() > 0) return kExitOk;
  SweepPlan s;
  SweepRun r(o, s);
  try {
    if (o.sub.empty() || o.grids.empty() || (o.out.empty() && !o.list))
      throw SweepUsage("give the subcommand, at least one --grid and --out DIR (or --merge DIR)");
    prepare(s, o, fixed);
    r.selected = select_points(o, s.points.size());
    r.skip.resize(s.points.size());
    for (size_t i = 0; i < s.points.size(); ++i) r.skip[i] = skip_reason(s, o.sub, s.points[i]);
  } catch (const SweepUsage& e) {
    std::cerr << "gpuledger sweep: error: " << e.what() << "\n";
    return kExitUsage;
  }
  if (o.list) {
    print_list(r);
    return kExitOk;
  }
  if (std::all_of(r.skip.begin(), r.skip.end(), [](const auto& why) { return why.has_value(); })) {
    // No point can run. The subcommand alone exits 2 for every one of them,
    // so the sweep does too, before it writes anything: exit 0 would read as
    // a sweep that measured something, and 1 is for a point that ran and failed.
    std::cerr << fmt::format("gpuledger sweep: error: no point can run: {} refuses all {} (first, point {}: {})\n",
                             o.sub, s.points.size(), s.points.front().name, *r.skip.front());
    return kExitUsage;
  }
  fs::create_directories(o.out);
  r.plan = plan_document(o, fixed, s);
  report::write_report(r.plan, (fs::path(o.out) / "sweep.plan.json").string());
  int64_t skipped = 0, done = 0;
  for (size_t i : r.selected) {
    if (o.resume && !resumable_entry(o.out, s.points[i]).is_null())
      ++done;
    else if (r.skip[i])
      ++skipped;
  }
  r.to_run = static_cast<int64_t>(r.selected.size()) - skipped - done;
  std::cerr << fmt::format("sweep: {} points: {} to run, {} skipped (the subcommand refuses them){}\n",
                           r.selected.size(), r.to_run, skipped,
                           o.resume ? fmt::format(", {} done already (--resume)", done) : std::string());
  forward_interrupts_to_children();
  const bool finished = run_points(r);
  if (r.selected.size() < s.points.size()) {  // one point of a job array: --merge builds the index
    if (!finished) return kExitFailed;
    const json e = report::read_json_file(point_file(o.out, s.points[r.selected[0]].name, ".point.json"));
    return e["status"] == "ok" || e["status"] == "skipped" ? kExitOk : kExitFailed;
  }
  const json index = build_index(o.out, r.plan);
  write_index(o.out, index);
  if (!finished) {
    std::cerr << "sweep: interrupted; --resume reruns only the points not done\n";
    return kExitFailed;
  }
  std::cout << "\n";
  report::print_sweep_table(std::cout, o.sub, index);
  return exit_status_saying_why(index, o.out);
}

}  // namespace

void add_sweep_command(CLI::App& root, std::vector<Command>& out) {
  auto o = std::make_shared<SweepOptions>();
  auto* app = root.add_subcommand(
      "sweep", "run a grid of points of plan, kv, train or infer, each its own job, one report per point");
  app->add_option("subcommand", o->sub, "the subcommand each point runs")
      ->check(CLI::IsMember({"plan", "kv", "train", "infer"}));
  app->add_option("--grid", o->grids,
                  "KEY=V1,V2,...: an option of the subcommand and its values (repeatable; the points are the "
                  "cartesian product, the first --grid slowest); layout=auto: every dp·tp·pp of the world the "
                  "model allows")
      ->allow_extra_args(false)
      ->type_name("KEY=V1,V2,...");
  app->add_option("--out", o->out, "folder for the reports: DIR/<point>.json and the index DIR/sweep.json")
      ->check(CLI::Validator([](std::string& dir) { return report::output_dir_problem(dir); }, "DIR"))
      ->type_name("DIR");
  app->add_flag("--tables", o->tables, "print each point's own tables too (default: progress and one summary table)");
  app->add_flag("--resume", o->resume, "skip the points whose report is complete and ran with the same options");
  app->add_flag("--list", o->list, "print the points with their index (and which are skipped), run nothing");
  app->add_option("--point", o->point, "run point N only (default: SLURM_ARRAY_TASK_ID when set)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--merge", o->merge, "build DIR/sweep.json and sweep.csv from the points' files, run nothing")
      ->type_name("DIR");
  app->add_option("--np", o->np, "the ranks the sweep has (default: the launcher's world, mpirun -np / srun -n)")
      ->check(CLI::PositiveNumber);
  app->add_option("--launcher", o->launcher,
                  "how a point of more than one rank starts, {ranks} its rank count (default: srun --ntasks={ranks} "
                  "in a Slurm job, else mpirun -np {ranks})");
  // Every other argument is the subcommand's own, passed to every point as given.
  app->allow_extras();
  app->footer(
      "Every option not listed above is the subcommand's own (see gpuledger plan|kv|train|infer --help)\n"
      "and is passed unchanged to every point. A --grid KEY is that subcommand's option without the dashes;\n"
      "a flag (sp) takes 1/0. A point's report is DIR/<name>.json, the name made of the grid keys and\n"
      "values (tp2_pp4_zero1, recompute-full); DIR/sweep.json and DIR/sweep.csv index them (docs/sweep.md).\n"
      "Each point runs as its own job (docs/cluster.md): one that fails or runs out of memory ends alone.\n"
      "A point the subcommand refuses (a layout that does not divide) is skipped; a point whose input is wrong\n"
      "(an unknown preset, a malformed model file, a bad value) is a usage error before anything runs.\n"
      "Exit 0: every point ok or skipped, one ran; 1: a point failed (its report says why) or its checks did;\n"
      "2: usage, or no point could run (every one skipped).\n\n"
      "Examples:\n"
      "  gpuledger sweep plan --model llama3-70b --seq 8192 --microbatches 32 --device h100-sxm \\\n"
      "      --grid tp=4,8 --grid pp=2,4,8 --grid zero=0,1 --out results/sweep-70b\n"
      "  mpirun -np 4 gpuledger sweep train --model tiny-llama --steps 3 --grid layout=auto \\\n"
      "      --grid zero=0,1,2,3 --grid recompute=none,selective,full --out results/sweep-tiny [--resume]\n"
      "  /usr/bin/python3 scripts/plot.py results/sweep-70b");
  out.push_back({app, [o, app]() { return run_sweep(*o, app->remaining()); }});
}

}  // namespace gpuledger::cli
