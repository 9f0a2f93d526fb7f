// The sweep's plan (see sweep_plan.h).
#include "bench/cli/sweep_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include "bench/cli/sweep_launch.h"
#include "core/layout.h"
#include "core/model_config.h"

namespace gpuledger::cli {

namespace {

bool is_layout_key(const std::string& k) { return k == "dp" || k == "tp" || k == "pp"; }

// What the subcommand's own checks say of its options as they are set now.
std::optional<std::string> refusal(const RunCommand& command) {
  try {
    command.validate();
  } catch (const ConfigError& e) {
    return e.what();
  } catch (const LayoutError& e) {
    return e.what();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return std::nullopt;
}

// The world layout=auto factorises: the launcher's, --np, or meta's --world.
int64_t auto_world(const SweepPlan& s, const SweepOptions& o) {
  if (s.world > 0) return s.world;
  const std::string w = option_text(*s.app, "--world");
  if (!w.empty() && w != "0") return std::stoll(w);
  throw SweepUsage("--grid layout=auto needs a world: run the sweep under mpirun -np N (or srun), give --np N, or " +
                   std::string(o.sub == "train" ? "--backend meta --world N" : "--world N"));
}

// Expands a layout=auto axis (dp, tp and pp grids beside it filter it).
std::vector<GridAxis> with_auto_layout(SweepPlan& s, const SweepOptions& o, std::vector<GridAxis> axes) {
  const auto at = std::find_if(axes.begin(), axes.end(), [](const GridAxis& a) { return a.key == "layout"; });
  if (at == axes.end()) return axes;
  if (o.sub != "train" && o.sub != "plan") throw SweepUsage("--grid layout=auto: only train and plan have a layout");
  if (at->values != std::vector<std::string>{"auto"}) throw SweepUsage("--grid layout: the one value is auto");
  for (const char* k : {"--dp", "--tp", "--pp"})
    if (s.app->get_option(k)->count() > 0)
      throw SweepUsage(std::string("--grid layout=auto sets ") + k + "; filter it with --grid " + (k + 2) + "=...");
  std::map<std::string, std::vector<std::string>> filters;
  for (const auto& a : axes)
    if (is_layout_key(a.key)) filters[a.key] = a.values;
  const int64_t world = auto_world(s, o);
  AutoLayouts layouts = auto_layout_axis(world, filters, [&](const LayoutChoice& c) {
    apply_point(*s.app,
                {"", {}, {{"dp", std::to_string(c.dp)}, {"tp", std::to_string(c.tp)}, {"pp", std::to_string(c.pp)}}});
    return refusal(*s.command);
  });
  s.refused_layouts = layouts.refused;
  *at = layouts.axis;
  axes.erase(std::remove_if(axes.begin(), axes.end(), [](const GridAxis& a) { return is_layout_key(a.key); }),
             axes.end());
  return axes;
}

}  // namespace

std::string option_text(CLI::App& app, const std::string& name) {
  const CLI::Option* o = app.get_option_no_throw(name);
  if (!o) return "";
  if (o->count() > 0) return o->as<std::string>();
  return o->get_default_str();
}

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
  s.world = o.np > 0 ? o.np : launcher_world_size();
  std::vector<GridAxis> axes;
  std::set<std::string> keys;
  std::set<const CLI::Option*> swept;  // two names of one option (--sp, --no-overlap-grad-reduce) are one key
  for (const auto& g : o.grids) {
    if (g.rfind("layout=", 0) == 0) {
      axes.push_back({"layout", {g.substr(7)}, false, {}});
      if (!keys.insert("layout").second) throw SweepUsage("--grid layout is given twice");
      continue;
    }
    axes.push_back(parse_axis(g, *s.app));
    const auto& k = axes.back().key;
    if (!keys.insert(k).second || !swept.insert(s.app->get_option("--" + k)).second)
      throw SweepUsage("--grid " + k + " is given twice");
    if (s.app->get_option("--" + k)->count() > 0)  // given among the fixed options, by any of its names
      throw SweepUsage("--" + k + " is both a fixed option and a --grid key");
  }
  for (const auto& a : axes)  // e.g. --gbs swept with --microbatches given: they exclude each other
    if (a.key != "layout")
      for (const CLI::Option* ex : s.app->get_option("--" + a.key)->get_excludes())
        if (ex->count() > 0 || swept.count(ex) > 0)
          throw SweepUsage("--grid " + a.key + ": --" + a.key + " excludes " + ex->get_name());
  s.axes = with_auto_layout(s, o, axes);
  s.points = make_points(s.axes, fixed);
  for (const auto& p : s.points) {
    try {
      apply_point(*s.app, p);
    } catch (const CLI::ParseError& e) {
      throw point_usage(p, e.what());
    }
    // An input wrong in itself (an unknown preset, a malformed model file, a
    // bad size) is the user's mistake, not a point the subcommand refuses:
    // skipping it would hide it behind the points that run.
    try {
      s.command->check_inputs();
    } catch (const std::exception& e) {
      throw point_usage(p, e.what());
    }
  }
}

int64_t point_ranks(SweepPlan& s, const std::string& sub) {
  if (sub != "train" && sub != "infer") return 1;
  if (option_text(*s.app, "--backend") == "meta") return 1;
  auto n = [&](const char* name) {
    const std::string v = option_text(*s.app, name);
    return v.empty() ? int64_t{1} : std::stoll(v);
  };
  return sub == "train" ? n("--dp") * n("--tp") * n("--pp") : n("--tp");
}

std::optional<std::string> skip_reason(SweepPlan& s, const std::string& sub, const Point& p) {
  apply_point(*s.app, p);
  if (auto why = refusal(*s.command)) return why;
  const int64_t ranks = point_ranks(s, sub);
  if (s.world > 0 && ranks > s.world)
    return fmt::format("the point's job has {} ranks, the sweep {} (mpirun -np, srun -n or --np)", ranks, s.world);
  return std::nullopt;
}

}  // namespace gpuledger::cli
