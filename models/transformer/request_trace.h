// Request traces for `infer --trace`: one {"prompt_len", "gen_len", "arrival",
// "arrival_s"} JSON object per line; "arrival" (the engine step it arrives at,
// an integer) and "arrival_s" (the engine clock in seconds at which it arrives,
// a finite number in [0, kMaxArrivalSeconds]) optional, default 0. Lengths are integers
// (12.5 or 1e3 is refused, never truncated) in [1, limits::kMaxTokens], at
// most limits::kMaxTraceRequests requests, the file a regular file of at most
// limits::kMaxTraceFileBytes (core/limits.h, core/input_file.h). The prompt
// ids come from the synthetic generator (make_requests, infer_engine.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gpuledger {

struct RequestShape {
  int64_t prompt_len = 1, gen_len = 1, arrival = 0;
  double arrival_s = 0;
};

inline constexpr double kMaxArrivalSeconds = 1e9;  // about 32 years: a guard, not a workload

// Poisson arrivals at `rate_per_s` requests per second (> 0, finite): n arrival
// times from 0, the gaps exponential with mean 1 / rate (−ln(1 − u) / rate, u
// uniform in [0, 1) from 53 bits of std::mt19937_64 seeded with `seed`, so the
// times are the same on every platform). The first request arrives at its gap.
std::vector<double> poisson_arrivals(int64_t n, double rate_per_s, uint64_t seed);

// Parses trace text; `origin` names it in messages ("PATH:LINE: ...").
// Throws std::invalid_argument naming the line and the field.
std::vector<RequestShape> parse_trace(const std::string& text, const std::string& origin);
// Reads and parses the trace file at `path` (ConfigError for a file that is
// not a regular file, too large, or has a control character in its name).
std::vector<RequestShape> read_trace(const std::string& path);

}  // namespace gpuledger
