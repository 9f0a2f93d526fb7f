// `gpuledger sweep`: a grid of points in one launch, one report per point
// (docs/architecture.md "Command line"; docs/sweep.md).
//
//   gpuledger sweep plan --model llama3-70b --seq 8192 --device h100-sxm
//                        --grid tp=2,4,8 --grid pp=1,2,4 --out results/sweep-70b
//
// runs the cartesian product of the grids (the first --grid varies slowest)
// one point after another in this process, each point by the very run
// `gpuledger <subcommand>` runs (commands.h RunCommand): the subcommand's
// options are parsed once from the fixed arguments, each point sets its grid
// values on them by name (through each option's own conversion and checks),
// and the command runs with --json DIR/<name>.json.
// So a point's report is exactly what that subcommand alone writes.
//
// Under mpirun every rank runs the same points in the same order (a train
// point is then one MPI job); MPI is initialised once for the whole sweep (a
// point's own MpiRuntime sees it initialised and leaves it so), rank 0 writes
// the reports, the index and the table.
//
// A failed point (out of memory, a layout that does not divide, an error) is a
// report too — the subcommand's own failure report, or, when it stopped before
// writing one, a minimal {"status": "error", "error": ...} report — and the
// sweep goes on. DIR/sweep.json indexes the points (schema gpuledger.sweep/1)
// with their status and headline figures. Exit 0 when every point is ok, 1
// when one failed (or its checks did), 2 on usage errors, found before any
// point runs: a bad --grid, a key that is not an option of the subcommand, a
// value the subcommand's option refuses.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <streambuf>
#include <string>
#include <vector>

#include "bench/cli/commands.h"
#include "bench/cli/guarded_run.h"
#include "bench/cli/sweep_grid.h"
#include "bench/exit_codes.h"
#include "bench/report/report.h"
#include "bench/report/report_reader.h"
#include "bench/report/sweep_index.h"
#include "bench/run/launcher.h"
#if GPULEDGER_HAVE_MPI
#include "comm/mpi_runtime.h"
#endif

namespace gpuledger::cli {

using nlohmann::json;

namespace {

// Copies everything written to std::cerr through, and keeps the tail: a
// subcommand that fails without throwing (an MPI job whose ranks agreed on a
// failure) says why on stderr, and that line becomes the point's error.
class StderrTail : public std::streambuf {
 public:
  StderrTail() : through_(std::cerr.rdbuf()) { std::cerr.rdbuf(this); }
  ~StderrTail() override { std::cerr.rdbuf(through_); }
  // The last non-empty line written.
  std::string last_line() const {
    auto end = tail_.find_last_not_of("\n ");
    if (end == std::string::npos) return {};
    auto begin = tail_.rfind('\n', end);
    return tail_.substr(begin == std::string::npos ? 0 : begin + 1,
                        end + 1 - (begin == std::string::npos ? 0 : begin + 1));
  }

 protected:
  int_type overflow(int_type ch) override {
    if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
    keep(std::string(1, traits_type::to_char_type(ch)));
    return through_->sputc(traits_type::to_char_type(ch));
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    keep(std::string(s, static_cast<size_t>(n)));
    return through_->sputn(s, n);
  }
  int sync() override { return through_->pubsync(); }

 private:
  void keep(const std::string& s) {
    tail_ += s;
    if (tail_.size() > 8192) tail_.erase(0, tail_.size() - 4096);
  }
  std::streambuf* through_;
  std::string tail_;
};

struct SweepOptions {
  std::string sub;
  std::vector<std::string> grids;
  std::string out;
  bool tables = false;
};

// The subcommand's options, parsed from the fixed arguments, and the grid.
struct SweepPlan {
  std::unique_ptr<RunCommand> command;
  CLI::App root;
  CLI::App* app = nullptr;
  std::vector<GridAxis> axes;
  std::vector<Point> points;
};

// Everything a usage error can come from, checked before the first point runs.
void prepare(SweepPlan& s, const SweepOptions& o, const std::vector<std::string>& fixed) {
  for (const auto& a : fixed)
    if (a == "--json" || a.rfind("--json=", 0) == 0)
      throw SweepUsage("--json: the sweep writes each point's report to --out DIR/<point>.json");
  s.command = make_run_command(o.sub);
  if (!s.command) throw SweepUsage("cannot sweep '" + o.sub + "' (plan, kv, train or infer)");
  s.app = s.root.add_subcommand(o.sub);
  s.command->bind(*s.app);
  try {
    std::vector<std::string> args{fixed.rbegin(), fixed.rend()};  // CLI11 takes the arguments last-first
    args.push_back(o.sub);
    s.root.parse(args);
  } catch (const CLI::ParseError& e) {
    throw SweepUsage(o.sub + ": " + e.what());
  }
  std::set<std::string> keys;
  std::set<const CLI::Option*> swept;  // two names of one option (--sp, --no-overlap-grad-reduce) are one key
  for (const auto& g : o.grids) {
    s.axes.push_back(parse_axis(g, *s.app));
    const auto& k = s.axes.back().key;
    if (!keys.insert(k).second || !swept.insert(s.app->get_option("--" + k)).second)
      throw SweepUsage("--grid " + k + " is given twice");
    if (s.app->get_option("--" + k)->count() > 0)  // given among the fixed options, by any of its names
      throw SweepUsage("--" + k + " is both a fixed option and a --grid key");
  }
  for (const auto& a : s.axes)  // e.g. --gbs swept with --microbatches given: they exclude each other
    for (const CLI::Option* ex : s.app->get_option("--" + a.key)->get_excludes())
      if (ex->count() > 0 || swept.count(ex) > 0)
        throw SweepUsage("--grid " + a.key + ": --" + a.key + " excludes " + ex->get_name());
  s.points = make_points(s.axes, fixed);
  for (const auto& p : s.points) {
    try {
      apply_point(*s.app, s.axes, p);
    } catch (const CLI::ParseError& e) {
      throw SweepUsage("point " + p.name + ": " + e.what());
    }
  }
}

#if GPULEDGER_HAVE_MPI
int64_t parsed_int(CLI::App& app, const std::string& name, int64_t fallback) {
  const CLI::Option* o = app.get_option_no_throw(name);
  return o && o->count() > 0 ? o->as<int64_t>() : fallback;
}

// Whether some point of a train sweep outside mpirun would start MPI itself
// (more than one rank, not simulated): MPI is then started once for the sweep,
// since MPI cannot be initialised again after a point finalised it.
bool some_point_starts_mpi(SweepPlan& s, const std::string& sub) {
  if (sub != "train") return false;
  for (const auto& p : s.points) {
    apply_point(*s.app, s.axes, p);
    CLI::App& app = *s.app;
    const int64_t world = parsed_int(app, "--dp", 1) * parsed_int(app, "--tp", 1) * parsed_int(app, "--pp", 1);
    const CLI::Option* b = app.get_option_no_throw("--backend");
    const std::string backend = b && b->count() > 0 ? b->as<std::string>() : "cpu";
    if (world > 1 && backend != "meta") return true;
  }
  return false;
}
#endif

std::string describe(const Point& p) {
  std::string s;
  for (const auto& [k, v] : p.values) s += (s.empty() ? "" : " ") + k + "=" + v;
  return s;
}

json index_skeleton(const SweepOptions& o, const std::vector<std::string>& fixed, const std::vector<GridAxis>& axes,
                    int64_t ranks) {
  json index;
  index["schema"] = report::kSweepSchema;
  index["kind"] = o.sub;
  json command = {"gpuledger", "sweep", o.sub};
  for (const auto& a : fixed) command.push_back(a);
  for (const auto& g : o.grids) command.insert(command.end(), {"--grid", g});
  command.insert(command.end(), {"--out", o.out});
  index["command"] = command;
  index["fixed_args"] = fixed;
  index["grid"] = json::array();
  for (const auto& a : axes) index["grid"].push_back({{"key", a.key}, {"values", a.values}});
  index["out"] = o.out;
  index["tool"] = {{"version", GPULEDGER_VERSION}, {"git", report::git_commit()}};
  index["env"] = {{"host", report::host_name()}, {"mpi_ranks", ranks}};
  index["points"] = json::array();
  return index;
}

// The point's report as written, or — when the subcommand stopped before
// writing one (a bad layout, an error in set-up) — a minimal one, written now.
json point_report(const SweepOptions& o, const Point& p, const std::string& path, const GuardedRun& g) {
  namespace fs = std::filesystem;
  if (fs::exists(path)) return report::read_report(path);
  json doc = report::make_report(o.sub);
  doc["status"] = "error";
  doc["error"] = g.error.empty() ? fmt::format("exited {} without a report", g.exit) : g.error;
  doc["exit"] = g.exit;
  doc["config"] = {{"args", p.args}};
  report::write_report(doc, path);
  return doc;
}

json index_entry(const SweepOptions& o, const Point& p, const std::string& file, const json& doc, const GuardedRun& g,
                 double seconds) {
  std::string status = doc.value("status", std::string("error"));
  if (status == "ok" && g.exit != kExitOk) status = "check_failed";
  json entry = {{"name", p.name},
                {"args", p.args},
                {"report", file},
                {"status", status},
                {"exit", g.exit},
                {"seconds", seconds},
                {"headline", report::headline(o.sub, doc)}};
  entry["values"] = json::object();
  for (const auto& [k, v] : p.values) entry["values"][k] = v;
  if (status != "ok") {
    std::string why = doc.value("error", g.error);
    if (why.empty()) why = fmt::format("{} check(s) failed", entry["headline"]["checks_failed"].get<int64_t>());
    entry["error"] = why;
  }
  return entry;
}

// Runs one point as `gpuledger <sub>` alone would; a failure without an
// exception (an MPI job whose ranks agreed on a failure) says why on stderr.
GuardedRun run_point(SweepPlan& s, const Point& p, const std::string& json_path, bool quiet) {
  StderrTail tail;
  GuardedRun g = run_guarded([&] {
    apply_point(*s.app, s.axes, p);
    s.command->output().json_path = json_path;
    s.command->output().quiet = quiet;
    return s.command->run();
  });
  if (g.exit != kExitOk && g.error.empty()) g.error = tail.last_line();
  return g;
}

int run_sweep(const SweepOptions& o, const std::vector<std::string>& fixed) {
  namespace fs = std::filesystem;
  SweepPlan s;
  try {
    prepare(s, o, fixed);
  } catch (const SweepUsage& e) {
    std::cerr << "gpuledger sweep: error: " << e.what() << "\n";
    return kExitUsage;
  }
#if GPULEDGER_HAVE_MPI
  std::optional<MpiRuntime> mpi;
  if (run::launched_by_mpi_launcher() || some_point_starts_mpi(s, o.sub)) mpi.emplace();
  const int64_t rank = mpi ? mpi->world_rank() : 0;
  const int64_t ranks = mpi ? mpi->world_size() : 1;
#else
  const int64_t rank = 0, ranks = 1;
#endif
  // plan and kv compute the same thing on every rank: only rank 0 writes.
  // train and infer points are MPI jobs: every rank gets the path, their rank 0
  // writes (and a rank failing inside a step writes its own view before aborting).
  const bool every_rank_gets_json = o.sub == "train" || o.sub == "infer";
  if (rank == 0) fs::create_directories(o.out);
  json index = index_skeleton(o, fixed, s.axes, ranks);
  const auto& points = s.points;
  int64_t failed = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    const Point& p = points[i];
    const std::string file = p.name + ".json";
    const std::string path = (fs::path(o.out) / file).string();
    if (rank == 0) {
      fs::remove(path);  // a report left by an earlier sweep must not pass for this one's
      // One line per point; its own output (--tables) starts on a line of its own.
      std::cerr << fmt::format("[{}/{}] {} ...{}", i + 1, points.size(), describe(p), o.tables ? "\n" : " ")
                << std::flush;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const GuardedRun g = run_point(s, p, rank == 0 || every_rank_gets_json ? path : "", !o.tables || rank != 0);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (g.exit != kExitOk) ++failed;
    if (rank != 0) continue;
    const json entry = index_entry(o, p, file, point_report(o, p, path, g), g, seconds);
    const std::string status = entry["status"];
    if (o.tables) std::cerr << fmt::format("[{}/{}] {} ... ", i + 1, points.size(), p.name);
    std::cerr << fmt::format("{} ({:.2f} s){}\n", status, seconds,
                             status == "ok" ? "" : ": " + entry["error"].get<std::string>())
              << std::flush;
    index["points"].push_back(entry);
    // Rewritten after every point: a sweep that is stopped (an MPI job aborted by
    // a point, a time limit) leaves an index of what it finished.
    const int64_t done = static_cast<int64_t>(i) + 1;
    index["summary"] = {{"points", points.size()},
                        {"done", done},
                        {"ok", done - failed},
                        {"failed", failed},
                        {"complete", done == static_cast<int64_t>(points.size())}};
    report::write_report(index, (fs::path(o.out) / "sweep.json").string());
  }
  if (rank == 0) {
    std::cout << "\n";
    report::print_sweep_table(std::cout, o.sub, index);
  }
  return failed > 0 ? kExitFailed : kExitOk;
}

}  // namespace

void add_sweep_command(CLI::App& root, std::vector<Command>& out) {
  auto o = std::make_shared<SweepOptions>();
  auto* app = root.add_subcommand(
      "sweep", "run a grid of points of plan, kv, train or infer in one launch, one report per point");
  app->add_option("subcommand", o->sub, "the subcommand each point runs")
      ->required()
      ->check(CLI::IsMember({"plan", "kv", "train", "infer"}));
  app->add_option("--grid", o->grids,
                  "KEY=V1,V2,...: an option of the subcommand and its values (repeatable; "
                  "the points are the cartesian product, the first --grid slowest)")
      ->required()
      ->allow_extra_args(false)
      ->type_name("KEY=V1,V2,...");
  app->add_option("--out", o->out, "folder for the reports: DIR/<point>.json and the index DIR/sweep.json")
      ->required()
      ->type_name("DIR");
  app->add_flag("--tables", o->tables, "print each point's own tables too (default: progress and one summary table)");
  // Every other argument is the subcommand's own, passed to every point as given.
  app->allow_extras();
  app->footer(
      "Every option not listed above is the subcommand's own (see gpuledger plan|kv|train|infer --help)\n"
      "and is passed unchanged to every point. A --grid KEY is that subcommand's option without the dashes;\n"
      "a flag (sp) takes 1/0. A point's report is DIR/<name>.json, the name made of the grid keys and\n"
      "values (tp2_pp4_zero1, recompute-full); DIR/sweep.json indexes them (docs/sweep.md).\n"
      "Exit 0: every point ok; 1: a point failed (its report says why) or its checks did; 2: usage.\n\n"
      "Examples:\n"
      "  gpuledger sweep plan --model llama3-70b --seq 8192 --microbatches 32 --device h100-sxm \\\n"
      "      --grid tp=4,8 --grid pp=2,4,8 --grid zero=0,1 --out results/sweep-70b\n"
      "  mpirun -np 4 gpuledger sweep train --model tiny-llama --backend cpu --steps 3 --dp 4 \\\n"
      "      --grid zero=0,1,2,3 --out results/sweep-zero\n"
      "  /usr/bin/python3 scripts/plot.py results/sweep-70b");
  out.push_back({app, [o, app]() { return run_sweep(*o, app->remaining()); }});
}

}  // namespace gpuledger::cli
