// The grid of a sweep (see sweep_grid.h).
#include "bench/cli/sweep_grid.h"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "core/limits.h"

namespace gpuledger::cli {

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) out.push_back(item);
  if (!s.empty() && s.back() == sep) out.push_back("");  // "tp=1,2," has an empty last value
  return out;
}

// "--json", "-q": an option typed where a value goes (the shell split nothing:
// `--grid model=--json` is one argument). "-1" and "-.5" are numbers, "-" alone
// is a value; the option's own check judges them.
bool looks_like_option(const std::string& v) {
  return v.size() > 1 && v[0] == '-' && !std::isdigit(static_cast<unsigned char>(v[1])) && v[1] != '.';
}

std::optional<bool> flag_value(const std::string& v) {
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  return std::nullopt;
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

}  // namespace

GridAxis parse_axis(const std::string& text, CLI::App& sub) {
  const auto eq = text.find('=');
  if (eq == std::string::npos) throw SweepUsage("--grid '" + text + "': expected KEY=V1,V2,... (e.g. --grid tp=1,2,4)");
  GridAxis a;
  a.key = text.substr(0, eq);
  while (!a.key.empty() && a.key.front() == '-') a.key.erase(0, 1);  // "--tp=1,2" reads as "tp=1,2"
  if (a.key.empty()) throw SweepUsage("--grid '" + text + "': the key before '=' is empty");
  if (a.key == "json" || a.key == "quiet" || a.key == "help")
    throw SweepUsage("--grid " + a.key + ": the sweep sets --" + a.key + " itself");
  const CLI::Option* opt = sub.get_option_no_throw("--" + a.key);
  if (!opt)
    throw SweepUsage("--grid " + a.key + ": '" + sub.get_name() + "' has no option --" + a.key + " (gpuledger " +
                     sub.get_name() + " --help lists them)");
  a.flag = opt->get_expected_max() == 0;  // add_flag sets expected(0)
  a.values = split(text.substr(eq + 1), ',');
  if (a.values.empty()) throw SweepUsage("--grid " + a.key + ": no values after '='");
  std::set<std::string> seen;
  for (const auto& v : a.values) {
    if (v.empty()) throw SweepUsage("--grid '" + text + "': an empty value");
    if (looks_like_option(v))
      throw SweepUsage("--grid " + a.key + ": value '" + v + "' looks like an option, not a value of --" + a.key +
                       " (the subcommand's own options go beside --grid, not in its values)");
    if (!seen.insert(v).second) throw SweepUsage("--grid " + a.key + ": value '" + v + "' given twice");
    if (a.flag && !flag_value(v))
      throw SweepUsage("--grid " + a.key + ": --" + a.key + " is a flag; its values are 1/0 (true/false)");
  }
  return a;
}

void check_grid_size(const std::vector<GridAxis>& axes) {
  // Checked before a point is made: the product alone may not fit in 64 bits.
  int64_t points = 1;
  for (const auto& a : axes) {
    const auto n = std::max<int64_t>(1, static_cast<int64_t>(a.values.size()));
    if (points > limits::kMaxGridPoints / n)
      throw SweepUsage(fmt::format("--grid: the grid has more than {} points (the limit)", limits::kMaxGridPoints));
    points *= n;
  }
}

std::vector<Point> make_points(const std::vector<GridAxis>& axes, const std::vector<std::string>& fixed) {
  check_grid_size(axes);
  std::vector<Point> points;
  std::vector<size_t> idx(axes.size(), 0);
  std::map<std::string, int> names;
  while (true) {
    Point p;
    p.args = fixed;
    for (size_t i = 0; i < axes.size(); ++i) {
      const auto& a = axes[i];
      const std::vector<Setting> sets =
          a.settings.empty() ? std::vector<Setting>{{a.key, a.values[idx[i]]}} : a.settings[idx[i]];
      for (const auto& [key, v] : sets) {
        p.values.emplace_back(key, v);
        if (!p.name.empty()) p.name += '_';
        p.name += name_piece(key, v);
        if (a.flag) {
          // --sp=0 / --sp=1: CLI11 reads a flag's value, so a flag on by default can be switched off too.
          p.args.push_back("--" + key + "=" + (*flag_value(v) ? "true" : "false"));
        } else {
          p.args.push_back("--" + key);
          p.args.push_back(v);
        }
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

void apply_point(CLI::App& sub, const Point& p) {
  for (const auto& [key, value] : p.values) {
    CLI::Option* opt = sub.get_option("--" + key);
    const bool flag = opt->get_expected_max() == 0;
    opt->clear();
    // A flag's value as its own parser reads it: --no-overlap-grad-reduce=true is "false".
    opt->add_result(flag ? opt->get_flag_value(key, *flag_value(value) ? "true" : "false") : value);
    opt->run_callback();
  }
}

std::string point_text(const Point& p) {
  std::string s;
  for (const auto& [k, v] : p.values) s += (s.empty() ? "" : " ") + k + "=" + v;
  return s;
}

SweepUsage point_usage(const Point& p, const std::string& what) {
  return SweepUsage("point " + p.name + " (" + point_text(p) + "): " + what);
}

std::string point_value(const Point& p, const std::string& key) {
  for (const auto& [k, v] : p.values)
    if (k == key) return v;
  return "";
}

}  // namespace gpuledger::cli
