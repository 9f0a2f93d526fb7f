// The grid of a sweep: --grid KEY=V1,V2,... axes checked against the
// subcommand's options, their cartesian product as points (the first axis
// slowest), and a point's values set on the subcommand's options by name.
#pragma once
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace CLI {
class App;
}

namespace gpuledger::cli {

// One (option without dashes, value as typed) a point sets.
using Setting = std::pair<std::string, std::string>;

struct GridAxis {
  std::string key;                  // an option of the subcommand, without the dashes ("layout": several)
  std::vector<std::string> values;  // as typed
  bool flag = false;                // a flag option: values are true/false, 1/0, yes/no, on/off
  // What each value sets, when a value sets more than its own key (layout=auto:
  // dp, tp and pp); empty for an ordinary axis, whose value sets `key`.
  std::vector<std::vector<Setting>> settings;
};

struct Point {
  std::string name;               // file name stem, e.g. tp2_pp4_zero1
  std::vector<std::string> args;  // the point's options as a command line (fixed, then grid)
  std::vector<Setting> values;    // (option, value) per option the grid sets, grid order
};

// A usage error found while building the grid (exit 2).
struct SweepUsage : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "tp=1,2,4" → {tp, [1, 2, 4]}, checked against `sub`'s options.
GridAxis parse_axis(const std::string& text, CLI::App& sub);
// Throws SweepUsage when the product of the axes' sizes is above
// limits::kMaxGridPoints (core/limits.h).
void check_grid_size(const std::vector<GridAxis>& axes);
// The cartesian product, the first axis slowest (nested loops in --grid order).
std::vector<Point> make_points(const std::vector<GridAxis>& axes, const std::vector<std::string>& fixed);
// Sets the point's values on the options `sub` is bound to, through each
// option's own conversion and checks (throws CLI::ParseError on a value the
// option refuses). Options the point does not name keep their values.
void apply_point(CLI::App& sub, const Point& p);
// The value of `key` a point sets, or "" when the grid does not set it.
std::string point_value(const Point& p, const std::string& key);
// The point's values as typed: "tp=2 model=tiny-llama".
std::string point_text(const Point& p);
// A usage error of one point: "point NAME (KEY=V ...): what".
SweepUsage point_usage(const Point& p, const std::string& what);

}  // namespace gpuledger::cli
