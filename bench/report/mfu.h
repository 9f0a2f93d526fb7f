// MFU in a report: achieved FLOP/s over a peak, written as a fraction — or,
// above 1, not written: a fraction above the peak means the FLOP count, the
// clock or the peak is wrong, so the report carries the figure as an error
// ("<key>_error") and a failing check, and the run exits 1.
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace gpuledger::report {

// section[key] = flops_per_s / peak (null without a peak or a rate); above 1:
// section[key] = null, section[key + "_error"] the figure, and a failing
// "<check_name> <= 1" check appended to `checks`. A passing check is appended
// whenever the fraction is known.
void put_mfu(nlohmann::json& section, const std::string& key, double flops_per_s, const std::optional<double>& peak,
             const std::string& against, nlohmann::json& checks, const std::string& check_name);

}  // namespace gpuledger::report
