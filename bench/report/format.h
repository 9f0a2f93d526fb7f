// Number formatting for the tables people read: bytes in binary units, counts
// with thousands separators, FLOPs and rates in SI units.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace gpuledger::report {

std::string format_bytes(double bytes);                                            // "1.50 GiB", "512.00 KiB", "17 B"
std::string format_count(int64_t n);                                               // "6,738,415,616"
std::string format_si(double value, const std::string& unit);                      // "989.4 TFLOP/s"
std::string format_percent(double fraction);                                       // "37.2%"
std::string format_seconds(double s);                                              // "38.9 days", "1.25 s", "3.4 ms"
std::string format_optional_si(std::optional<double> v, const std::string& unit);  // "unknown" if empty

}  // namespace gpuledger::report
