// `gpuledger sweep`: a grid of points in one launch, one report per point
// (docs/architecture.md "Command line"; docs/sweep.md).
//
//   gpuledger sweep plan --model llama3-70b --seq 8192 --device h100-sxm
//                        --grid tp=2,4,8 --grid pp=1,2,4 --out results/sweep-70b
//
// runs the cartesian product of the grids (the first --grid varies slowest)
// one point after another in this process, each point by the very function
// `gpuledger <subcommand>` runs: a fresh CLI11 parser is built with that
// subcommand's registration (commands.h) and given the point's argv (the
// fixed options, then --KEY VALUE per grid (--KEY=true|false for a flag),
// then --json DIR/<name>.json).
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
// value the subcommand's parser refuses.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <array>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <streambuf>
#include <string>
#include <vector>

#include "bench/cli/commands.h"
#include "bench/exit_codes.h"
#include "bench/report/format.h"
#include "bench/report/report.h"
#include "bench/report/table.h"
#include "core/model_config.h"
#include "core/layout.h"
#if GPULEDGER_HAVE_MPI
#include "comm/mpi_runtime.h"
#endif

namespace gpuledger::cli {

using nlohmann::json;

namespace {

inline constexpr std::string_view kSweepSchema = "gpuledger.sweep/1";

// ---- the grid: keys, values, points ----

struct GridAxis {
  std::string key;                  // an option of the subcommand, without the dashes
  std::vector<std::string> values;  // as typed
  bool flag = false;                // a flag option: values are true/false, 1/0, yes/no, on/off
};

struct Point {
  std::string name;                         // file name stem, e.g. tp2_pp4_zero1
  std::vector<std::string> args;            // the subcommand's options for this point (no --json)
  std::vector<std::pair<std::string, std::string>> values;   // (key, value) per axis, grid order
};

// A usage error found while building the grid (exit 2).
struct SweepUsage : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) out.push_back(item);
  if (!s.empty() && s.back() == sep) out.push_back("");   // "tp=1,2," has an empty last value
  return out;
}

std::optional<bool> flag_value(const std::string& v) {
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  return std::nullopt;
}

// A parser holding only `sub`'s registration: what the grid is checked against
// and what each point runs.
struct SubParser {
  CLI::App root;
  std::vector<Command> commands;
  explicit SubParser(const std::string& sub) {
    if (sub == "plan") add_plan_command(root, commands);
    else if (sub == "kv") add_kv_command(root, commands);
    else if (sub == "train") add_train_command(root, commands);
    else if (sub == "infer") add_infer_command(root, commands);
    else throw SweepUsage("cannot sweep '" + sub + "' (plan, kv, train or infer)");
  }
  CLI::App& app() { return *commands.front().app; }
  // CLI11 takes the arguments last-first.
  void parse(const std::string& sub, const std::vector<std::string>& args) {
    std::vector<std::string> rev{args.rbegin(), args.rend()};
    rev.push_back(sub);
    root.parse(rev);
  }
};

// "tp=1,2,4" → {tp, [1, 2, 4]}, checked against the subcommand's options.
GridAxis parse_axis(const std::string& text, CLI::App& sub) {
  const auto eq = text.find('=');
  if (eq == std::string::npos)
    throw SweepUsage("--grid '" + text + "': expected KEY=V1,V2,... (e.g. --grid tp=1,2,4)");
  GridAxis a;
  a.key = text.substr(0, eq);
  while (!a.key.empty() && a.key.front() == '-') a.key.erase(0, 1);   // "--tp=1,2" reads as "tp=1,2"
  if (a.key.empty()) throw SweepUsage("--grid '" + text + "': the key before '=' is empty");
  if (a.key == "json" || a.key == "quiet" || a.key == "help")
    throw SweepUsage("--grid " + a.key + ": the sweep sets --" + a.key + " itself");
  const CLI::Option* opt = sub.get_option_no_throw("--" + a.key);
  if (!opt)
    throw SweepUsage("--grid " + a.key + ": '" + sub.get_name() + "' has no option --" + a.key +
                     " (gpuledger " + sub.get_name() + " --help lists them)");
  a.flag = opt->get_expected_max() == 0;   // add_flag sets expected(0)
  a.values = split(text.substr(eq + 1), ',');
  if (a.values.empty()) throw SweepUsage("--grid " + a.key + ": no values after '='");
  std::set<std::string> seen;
  for (const auto& v : a.values) {
    if (v.empty()) throw SweepUsage("--grid '" + text + "': an empty value");
    if (!seen.insert(v).second) throw SweepUsage("--grid " + a.key + ": value '" + v + "' given twice");
    if (a.flag && !flag_value(v))
      throw SweepUsage("--grid " + a.key + ": --" + a.key + " is a flag; its values are 1/0 (true/false)");
  }
  return a;
}

// The file-name piece of one (key, value): the key, then the value — "tp2", or
// "recompute-full" when the value starts with a letter — with any character
// outside [A-Za-z0-9.-] turned into '-' (so a path value stays one file name).
std::string name_piece(const std::string& key, const std::string& value) {
  std::string v = value;
  for (char& c : v)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') c = '-';
  const bool digit = !v.empty() && (std::isdigit(static_cast<unsigned char>(v.front())) || v.front() == '.');
  return key + (digit ? "" : "-") + v;
}

// The cartesian product, the first axis slowest (nested loops in --grid order).
std::vector<Point> make_points(const std::vector<GridAxis>& axes, const std::vector<std::string>& fixed) {
  std::vector<Point> points;
  std::vector<size_t> idx(axes.size(), 0);
  std::map<std::string, int> names;
  while (true) {
    Point p;
    p.args = fixed;
    for (size_t i = 0; i < axes.size(); ++i) {
      const auto& a = axes[i];
      const auto& v = a.values[idx[i]];
      p.values.emplace_back(a.key, v);
      if (i > 0) p.name += '_';
      p.name += name_piece(a.key, v);
      if (a.flag) {
        // --sp=0 / --sp=1: CLI11 reads a flag's value, so a flag on by default can be switched off too.
        p.args.push_back("--" + a.key + "=" + (*flag_value(v) ? "true" : "false"));
      } else {
        p.args.push_back("--" + a.key);
        p.args.push_back(v);
      }
    }
    // Two values that sanitise alike ("a/b", "a-b") still get files of their own.
    if (const int n = names[p.name]++; n > 0) p.name += fmt::format("_{}", n + 1);
    points.push_back(std::move(p));
    size_t i = axes.size();
    while (i > 0 && ++idx[i - 1] == axes[i - 1].values.size()) idx[--i] = 0;
    if (i == 0) break;
  }
  return points;
}

// ---- running one point ----

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
    return tail_.substr(begin == std::string::npos ? 0 : begin + 1, end + 1 - (begin == std::string::npos ? 0 : begin + 1));
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

struct PointRun {
  int exit = kExitOk;
  std::string error;   // why it failed, when the subcommand said so
};

// Runs `sub` on `args` exactly as main.cpp would (same exception → exit mapping).
PointRun run_point(const std::string& sub, const std::vector<std::string>& args) {
  PointRun pr;
  StderrTail tail;
  try {
    SubParser p(sub);
    p.parse(sub, args);
    pr.exit = p.commands.front().run();
  } catch (const CLI::ParseError& e) {
    pr.exit = kExitUsage;
    pr.error = e.what();
  } catch (const ConfigError& e) {
    pr.exit = kExitUsage;
    pr.error = e.what();
  } catch (const LayoutError& e) {
    pr.exit = kExitUsage;
    pr.error = e.what();
  } catch (const std::invalid_argument& e) {
    pr.exit = kExitUsage;
    pr.error = e.what();
  } catch (const std::exception& e) {
    pr.exit = kExitFailed;
    pr.error = e.what();
  }
  if (pr.exit != kExitOk && pr.error.empty()) pr.error = tail.last_line();
  return pr;
}

// ---- headline figures, read back from a point's report ----

json max_over_ranks(const json& doc, const std::vector<std::string>& path) {
  json best = nullptr;
  for (const auto& r : doc.value("ranks", json::array())) {
    const json* v = &r;
    for (const auto& k : path) {
      if (!v->is_object() || !v->contains(k)) { v = nullptr; break; }
      v = &(*v)[k];
    }
    if (v && v->is_number() && (best.is_null() || v->get<double>() > best.get<double>())) best = *v;
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
    h["tokens_per_s"] = summary_value(doc, {"tokens_per_s"});
    h["mfu"] = summary_value(doc, {"mfu"});
    if (kind == "train") {
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

// ---- the final table ----

std::string cell(const json& v, const std::string& how) {
  if (v.is_null()) return "-";
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  const double x = v.get<double>();
  if (how == "bytes") return report::format_bytes(x);
  if (how == "percent") return report::format_percent(x);
  if (how == "seconds") return report::format_seconds(x);
  if (how == "count") return report::format_count(static_cast<int64_t>(x));
  if (how == "flops") return report::format_si(x, "FLOP");
  return fmt::format("{:.{}f}", x, how == "loss" ? 4 : 1);
}

void print_table(std::ostream& os, const std::string& kind, const json& index) {
  // (header, headline key, format) per kind.
  std::vector<std::array<std::string, 3>> cols;
  if (kind == "plan")
    cols = {{"budget peak", "budget_peak_bytes", "bytes"}, {"fits", "fits", ""},
            {"model FLOP/step", "model_flops_per_step", "flops"}, {"step ≥", "step_time_lower_bound_s", "seconds"}};
  else if (kind == "kv")
    cols = {{"KV/token", "kv_bytes_per_token", "bytes"}, {"reserved", "kv_reserved_bytes", "bytes"},
            {"capacity", "capacity_sequences", "count"}, {"roofline tok/s", "tokens_per_s", ""}};
  else if (kind == "train")
    cols = {{"peak", "peak_bytes", "bytes"}, {"budget", "budget_peak_bytes", "bytes"},
            {"tokens/s", "tokens_per_s", ""}, {"MFU", "mfu", "percent"}, {"loss", "loss", "loss"}};
  else
    cols = {{"peak", "peak_bytes", "bytes"}, {"capacity", "capacity_sequences", "count"},
            {"predicted", "capacity_predicted", "count"}, {"tokens/s", "tokens_per_s", ""}, {"MFU", "mfu", "percent"}};
  const auto& pts = index["points"];
  report::Table t(fmt::format("sweep: {} points of `{}`, reports in {}", pts.size(), kind,
                              index["out"].get<std::string>()));
  std::vector<std::string> names = {"point", "status"};
  for (const auto& c : cols) names.push_back(c[0]);
  t.columns(names);
  int64_t failed = 0;
  for (const auto& p : pts) {
    std::vector<std::string> row = {p["name"], p["status"]};
    for (const auto& c : cols) row.push_back(cell(p["headline"].value(c[1], json(nullptr)), c[2]));
    t.row(row);
    if (p["status"] != "ok") {
      ++failed;
      t.note(fmt::format("{}: {}", p["name"].get<std::string>(), p.value("error", std::string("failed"))));
    }
  }
  t.note(fmt::format("{} of {} points ok", static_cast<int64_t>(pts.size()) - failed, pts.size()));
  os << t.render();
}

// ---- the sweep ----

struct SweepOptions {
  std::string sub;
  std::vector<std::string> grids;
  std::string out;
  bool tables = false;
};

bool under_mpirun() {   // as train and infer decide it
  for (auto v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_PROCID"})
    if (std::getenv(v)) return true;
  return false;
}

int64_t parsed_int(CLI::App& app, const std::string& name, int64_t fallback) {
  const CLI::Option* o = app.get_option_no_throw(name);
  return o && o->count() > 0 ? o->as<int64_t>() : fallback;
}

// Whether some point of a train sweep outside mpirun would start MPI itself
// (more than one rank, not simulated): MPI is then started once for the sweep,
// since MPI cannot be initialised again after a point finalised it.
bool some_point_starts_mpi(const std::string& sub, const std::vector<Point>& points) {
  if (sub != "train") return false;
  for (const auto& p : points) {
    SubParser sp(sub);
    sp.parse(sub, p.args);
    const int64_t world = parsed_int(sp.app(), "--dp", 1) * parsed_int(sp.app(), "--tp", 1) * parsed_int(sp.app(), "--pp", 1);
    const CLI::Option* b = sp.app().get_option_no_throw("--backend");
    const std::string backend = b && b->count() > 0 ? b->as<std::string>() : "cpu";
    if (world > 1 && backend != "meta") return true;
  }
  return false;
}

std::string describe(const Point& p) {
  std::string s;
  for (const auto& [k, v] : p.values) s += (s.empty() ? "" : " ") + k + "=" + v;
  return s;
}

int run_sweep(const SweepOptions& o, const std::vector<std::string>& fixed) {
  namespace fs = std::filesystem;
  // ---- usage: everything is checked before the first point runs ----
  std::vector<GridAxis> axes;
  std::vector<Point> points;
  try {
    for (const auto& a : fixed)
      if (a == "--json" || a.rfind("--json=", 0) == 0)
        throw SweepUsage("--json: the sweep writes each point's report to --out DIR/<point>.json");
    SubParser probe(o.sub);
    std::set<std::string> keys;
    for (const auto& g : o.grids) {
      axes.push_back(parse_axis(g, probe.app()));
      const auto& k = axes.back().key;
      if (!keys.insert(k).second) throw SweepUsage("--grid " + k + " is given twice");
      for (const auto& a : fixed)
        if (a == "--" + k || a.rfind("--" + k + "=", 0) == 0)
          throw SweepUsage("--" + k + " is both a fixed option and a --grid key");
    }
    points = make_points(axes, fixed);
    for (const auto& p : points) {
      try {
        SubParser(o.sub).parse(o.sub, p.args);
      } catch (const CLI::ParseError& e) {
        throw SweepUsage("point " + p.name + ": " + e.what());
      }
    }
  } catch (const SweepUsage& e) {
    std::cerr << "gpuledger sweep: error: " << e.what() << "\n";
    return kExitUsage;
  }

#if GPULEDGER_HAVE_MPI
  std::optional<MpiRuntime> mpi;
  if (under_mpirun() || some_point_starts_mpi(o.sub, points)) mpi.emplace();
  const int64_t rank = mpi ? mpi->world_rank() : 0;
  const int64_t ranks = mpi ? mpi->world_size() : 1;
#else
  const int64_t rank = 0, ranks = 1;
#endif
  // plan and kv compute the same thing on every rank: only rank 0 gets --json.
  // train and infer points are MPI jobs: every rank gets it, their rank 0 writes
  // (and a rank failing inside a step writes its own view before aborting).
  const bool every_rank_gets_json = o.sub == "train" || o.sub == "infer";
  if (rank == 0) fs::create_directories(o.out);

  json index;
  index["schema"] = kSweepSchema;
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

  int64_t failed = 0;
  auto write_index = [&](int64_t done) {
    index["summary"] = {{"points", points.size()}, {"done", done}, {"ok", done - failed}, {"failed", failed},
                        {"complete", done == static_cast<int64_t>(points.size())}};
    report::write_report(index, (fs::path(o.out) / "sweep.json").string());
  };
  for (size_t i = 0; i < points.size(); ++i) {
    const Point& p = points[i];
    const std::string file = p.name + ".json";
    const std::string path = (fs::path(o.out) / file).string();
    if (rank == 0) {
      fs::remove(path);   // a report left by an earlier sweep must not pass for this one's
      // One line per point; its own output (--tables) starts on a line of its own.
      std::cerr << fmt::format("[{}/{}] {} ...{}", i + 1, points.size(), describe(p), o.tables ? "\n" : " ")
                << std::flush;
    }
    std::vector<std::string> args = p.args;
    if (rank == 0 || every_rank_gets_json) args.insert(args.end(), {"--json", path});
    if (!o.tables || rank != 0) args.push_back("--quiet");
    const auto t0 = std::chrono::steady_clock::now();
    const PointRun pr = run_point(o.sub, args);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (pr.exit != kExitOk) ++failed;
    if (rank != 0) continue;

    json doc;
    if (fs::exists(path)) {
      doc = report::read_report(path);
    } else {
      // The subcommand stopped before writing (a bad layout, an error in set-up):
      // its report is this minimal one.
      doc = report::make_report(o.sub);
      doc["status"] = "error";
      doc["error"] = pr.error.empty() ? fmt::format("exited {} without a report", pr.exit) : pr.error;
      doc["exit"] = pr.exit;
      doc["config"] = {{"args", p.args}};
      report::write_report(doc, path);
    }
    std::string status = doc.value("status", std::string("error"));
    if (status == "ok" && pr.exit != kExitOk) status = "check_failed";
    json entry = {{"name", p.name}, {"args", p.args}, {"report", file}, {"status", status},
                  {"exit", pr.exit}, {"seconds", seconds}, {"headline", headline(o.sub, doc)}};
    entry["values"] = json::object();
    for (const auto& [k, v] : p.values) entry["values"][k] = v;
    if (status != "ok") {
      std::string why = doc.value("error", pr.error);
      if (why.empty()) why = fmt::format("{} check(s) failed", entry["headline"]["checks_failed"].get<int64_t>());
      entry["error"] = why;
    }
    if (o.tables) std::cerr << fmt::format("[{}/{}] {} ... ", i + 1, points.size(), p.name);
    std::cerr << fmt::format("{} ({:.2f} s){}\n", status, seconds,
                             status == "ok" ? "" : ": " + entry["error"].get<std::string>()) << std::flush;
    index["points"].push_back(entry);
    // Rewritten after every point: a sweep that is stopped (an MPI job aborted by
    // a point, a time limit) leaves an index of what it finished.
    write_index(static_cast<int64_t>(i) + 1);
  }
  if (rank == 0) {
    std::cout << "\n";
    print_table(std::cout, o.sub, index);
  }
  return failed > 0 ? kExitFailed : kExitOk;
}

}  // namespace

void add_sweep_command(CLI::App& root, std::vector<Command>& out) {
  auto o = std::make_shared<SweepOptions>();
  auto* app = root.add_subcommand(
      "sweep", "run a grid of points of plan, kv, train or infer in one launch, one report per point");
  app->add_option("subcommand", o->sub, "the subcommand each point runs")
      ->required()->check(CLI::IsMember({"plan", "kv", "train", "infer"}));
  app->add_option("--grid", o->grids, "KEY=V1,V2,...: an option of the subcommand and its values (repeatable; "
                                      "the points are the cartesian product, the first --grid slowest)")
      ->required()->allow_extra_args(false)->type_name("KEY=V1,V2,...");
  app->add_option("--out", o->out, "folder for the reports: DIR/<point>.json and the index DIR/sweep.json")
      ->required()->type_name("DIR");
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
