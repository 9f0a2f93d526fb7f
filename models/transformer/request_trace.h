// Request traces for `infer --trace`: one {"prompt_len", "gen_len", "arrival"}
// JSON object per line ("arrival" optional, default 0). Lengths are integers
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
};

// Parses trace text; `origin` names it in messages ("PATH:LINE: ...").
// Throws std::invalid_argument naming the line and the field.
std::vector<RequestShape> parse_trace(const std::string& text, const std::string& origin);
// Reads and parses the trace file at `path` (ConfigError for a file that is
// not a regular file, too large, or has a control character in its name).
std::vector<RequestShape> read_trace(const std::string& path);

}  // namespace gpuledger
