// Helpers shared by the subcommands (see commands.h).
#include <iostream>
#include <sstream>

#include "bench/cli/commands.h"
#include "analytic/budget.h"
#include "core/model_config.h"

namespace gpuledger::cli {

std::ostream& table_stream(const Options& o) { return o.json_path == "-" ? std::cerr : std::cout; }

std::vector<int64_t> select_ranks(const std::string& spec, const Layout& l, int64_t world) {
  if (spec == "roles") return analytic::role_ranks(l);
  std::vector<int64_t> out;
  if (spec == "all") {
    for (int64_t r = 0; r < world; ++r) out.push_back(r);
    return out;
  }
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t pos = 0;
    int64_t r = -1;
    try {
      r = std::stoll(item, &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    if (pos != item.size() || item.empty() || r < 0 || r >= world)
      throw ConfigError("ranks", "--ranks: '" + item + "' is not a rank in [0, " +
                                     std::to_string(world) + ") (use roles, all, or a list like 0,5,9)");
    out.push_back(r);
  }
  if (out.empty()) throw ConfigError("ranks", "--ranks: empty list");
  return out;
}

}  // namespace gpuledger::cli
