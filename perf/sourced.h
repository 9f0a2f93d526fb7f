// The two things every figure of a profile carries: its value and where it
// came from (a paper, a vendor document, an nccl-tests result, "measured by
// gpuledger calibrate", or "assumed: <the reasoning>"), and the profile's
// provenance as a whole. A figure without a source is refused when a profile
// is read (perf/profile_json.h). No formulas here.
#pragma once
#include <string>

namespace gpuledger::perf {

struct Sourced {
  double value = 0;
  std::string source;
  bool operator==(const Sourced&) const = default;
};

// "measured": taken on this machine by `gpuledger calibrate` (date and
// command say when and how); "published, not measured here": every figure
// carries its own published source (or "assumed: …").
struct Provenance {
  std::string kind;     // kMeasured or kPublished
  std::string date;     // measured: UTC date and time
  std::string command;  // measured: the command line
  bool operator==(const Provenance&) const = default;
};
inline constexpr const char* kMeasured = "measured";
inline constexpr const char* kPublished = "published, not measured here";

}  // namespace gpuledger::perf
