// MFU against a peak (see mfu.h).
#include "bench/report/mfu.h"

#include <fmt/format.h>

#include "bench/report/checks.h"

namespace gpuledger::report {

void put_mfu(nlohmann::json& section, const std::string& key, double flops_per_s, const std::optional<double>& peak,
             const std::string& against, nlohmann::json& checks, const std::string& check_name) {
  if (!peak || !(*peak > 0) || !(flops_per_s > 0)) {
    section[key] = nullptr;
    return;
  }
  const double mfu = flops_per_s / *peak;
  checks.push_back(bench::make_bound_check(check_name + " <= 1", 0, mfu, 1.0));
  if (mfu > 1.0) {
    section[key] = nullptr;
    section[key + "_error"] =
        fmt::format("MFU {:.1f}% is above 100% of the {} peak: not a measurement", 100.0 * mfu, against);
    return;
  }
  section[key] = mfu;
}

}  // namespace gpuledger::report
