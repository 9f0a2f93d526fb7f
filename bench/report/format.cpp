// Number formatting (see format.h).
#include "bench/report/format.h"

#include <fmt/format.h>

#include <cmath>

namespace gpuledger::report {

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = bytes;
  int u = 0;
  while (std::fabs(v) >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  if (u == 0) return fmt::format("{:.0f} B", v);
  return fmt::format("{:.2f} {}", v, units[u]);
}

std::string format_count(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  int c = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    if (c && c % 3 == 0) out.insert(out.begin(), ',');
    out.insert(out.begin(), *it);
    ++c;
  }
  return n < 0 ? "-" + out : out;
}

std::string format_si(double value, const std::string& unit) {
  const char* prefixes[] = {"", "K", "M", "G", "T", "P", "E"};
  double v = value;
  int p = 0;
  while (std::fabs(v) >= 1000.0 && p < 6) {
    v /= 1000.0;
    ++p;
  }
  return fmt::format("{:.4g} {}{}", v, prefixes[p], unit);
}

std::string format_percent(double fraction) { return fmt::format("{:.1f}%", 100.0 * fraction); }

std::string format_seconds(double s) {
  if (s >= 86400.0) return fmt::format("{:.1f} days", s / 86400.0);
  if (s >= 3600.0) return fmt::format("{:.2f} h", s / 3600.0);
  if (s >= 1.0) return fmt::format("{:.3g} s", s);
  if (s >= 1e-3) return fmt::format("{:.3g} ms", s * 1e3);
  return fmt::format("{:.3g} us", s * 1e6);
}

std::string format_optional_si(std::optional<double> v, const std::string& unit) {
  return v ? format_si(*v, unit) : std::string("unknown");
}

}  // namespace gpuledger::report
