// Trace parsing and reading (see request_trace.h).
#include "models/transformer/request_trace.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "core/input_file.h"
#include "core/limits.h"

namespace gpuledger {

std::vector<RequestShape> parse_trace(const std::string& text, const std::string& path) {
  std::istringstream in(text);
  std::vector<RequestShape> out;
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(n);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const std::exception& e) {
      throw std::invalid_argument(where + ": not JSON: " + e.what());
    }
    RequestShape r;
    // Integers only: 12.5 or 1e3 is refused, never truncated.
    auto integer = [&](const char* key, std::optional<int64_t> fallback) -> int64_t {
      if (!j.is_object()) throw std::invalid_argument(where + ": a request is a JSON object");
      if (!j.contains(key)) {
        if (fallback) return *fallback;
        throw std::invalid_argument(where + ": needs integer \"" + key + "\"");
      }
      const auto& v = j.at(key);
      if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX}))
        throw std::invalid_argument(where + ": \"" + key + "\" must be an integer, got " + v.dump());
      return v.get<int64_t>();
    };
    r.prompt_len = integer("prompt_len", std::nullopt);
    r.gen_len = integer("gen_len", std::nullopt);
    r.arrival = integer("arrival", int64_t{0});
    if (r.prompt_len < 1 || r.gen_len < 1 || r.arrival < 0)
      throw std::invalid_argument(where + ": prompt_len and gen_len must be >= 1, arrival >= 0");
    if (j.contains("arrival_s")) {
      const auto& v = j.at("arrival_s");
      if (!v.is_number() || !(v.get<double>() >= 0) || v.get<double>() > kMaxArrivalSeconds)
        throw std::invalid_argument(where + ": \"arrival_s\" must be a number of seconds in [0, 1e9], got " + v.dump());
      r.arrival_s = v.get<double>();
    }
    if (r.prompt_len > limits::kMaxTokens || r.gen_len > limits::kMaxTokens || r.arrival > limits::kMaxTokens)
      throw std::invalid_argument(where + ": prompt_len, gen_len and arrival are at most " +
                                  std::to_string(limits::kMaxTokens) + " (the limit)");
    if (static_cast<int64_t>(out.size()) >= limits::kMaxTraceRequests)
      throw std::invalid_argument("trace '" + path + "' holds more than " + std::to_string(limits::kMaxTraceRequests) +
                                  " requests (the limit)");
    out.push_back(r);
  }
  if (out.empty()) throw std::invalid_argument("trace '" + path + "' holds no request");
  return out;
}

std::vector<double> poisson_arrivals(int64_t n, double rate_per_s, uint64_t seed) {
  if (!(rate_per_s > 0) || !std::isfinite(rate_per_s))
    throw std::invalid_argument("arrival rate must be a finite number > 0 requests/s");
  std::mt19937_64 gen(seed);
  std::vector<double> out;
  out.reserve(static_cast<size_t>(std::max<int64_t>(n, 0)));
  double t = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double u = static_cast<double>(gen() >> 11) * 0x1.0p-53;  // [0, 1)
    t += -std::log1p(-u) / rate_per_s;
    out.push_back(t);
  }
  return out;
}

std::vector<RequestShape> read_trace(const std::string& path) {
  return parse_trace(read_input_file(path, limits::kMaxTraceFileBytes, "trace"), path);
}

}  // namespace gpuledger
