// Names of the op classes and attention kinds; the device profile's checks (see device_profile.h).
#include "perf/device_profile.h"

#include <cmath>
#include <stdexcept>

#include "core/name_table.h"

namespace gpuledger::perf {
namespace {

constexpr NameTable<OpClass, 5> kOpClassNames{{
    {OpClass::kNorm, "norm"},
    {OpClass::kActivation, "activation"},
    {OpClass::kSoftmax, "softmax"},
    {OpClass::kOptimizer, "optimizer"},
    {OpClass::kCopy, "copy"},
}};

constexpr NameTable<AttentionKind, 2> kAttentionNames{{
    {AttentionKind::kFlash, "flash"},
    {AttentionKind::kMaterialized, "materialized"},
}};

// A figure's check: a source, and a value in (0, max] (or [0, max] when zero is allowed).
void check_figure(const Sourced& f, const std::string& what, double max = INFINITY, bool zero_ok = false) {
  if (f.source.empty()) throw std::invalid_argument(what + ": no source");
  const bool ok = std::isfinite(f.value) && (zero_ok ? f.value >= 0 : f.value > 0) && f.value <= max;
  if (!ok)
    throw std::invalid_argument(what + ": " + std::to_string(f.value) + " is not in " + (zero_ok ? "[0, " : "(0, ") +
                                (std::isinf(max) ? std::string("∞)") : std::to_string(max) + "]"));
}

}  // namespace

std::string_view op_class_name(OpClass c) { return name_in(kOpClassNames, c); }
std::optional<OpClass> parse_op_class(std::string_view name) { return value_in(kOpClassNames, name); }
std::string_view attention_kind_name(AttentionKind k) { return name_in(kAttentionNames, k); }
std::optional<AttentionKind> parse_attention_kind(std::string_view name) { return value_in(kAttentionNames, name); }

void validate_device_profile(const DeviceProfile& p) {
  if (p.name.empty()) throw std::invalid_argument("device profile: no name");
  if (p.provenance.kind != kMeasured && p.provenance.kind != kPublished)
    throw std::invalid_argument("device profile " + p.name + ": provenance must be \"" + kMeasured + "\" or \"" +
                                kPublished + "\", got \"" + p.provenance.kind + "\"");
  if (p.dtypes.empty()) throw std::invalid_argument("device profile " + p.name + ": no dtype has GEMM figures");
  const std::string at = "device profile " + p.name + ": ";
  for (const auto& [dtype, f] : p.dtypes) {
    const std::string d = at + std::string(dtype_name(dtype)) + " ";
    check_figure(f.peak_flops_per_s, d + "peak_flops_per_s");
    check_figure(f.gemm_efficiency, d + "gemm_efficiency", 1.0);
    if (f.gemm && f.gemm->source.empty()) throw std::invalid_argument(d + "gemm_table: no source");
    if (!f.gemm_points.seconds.empty() && f.gemm_points.source.empty())
      throw std::invalid_argument(d + "gemm_points: no source");
    for (const auto& [call, seconds] : f.gemm_points.seconds)
      if (call.m < 1 || call.n < 1 || call.k < 1 || call.batch < 1 || !std::isfinite(seconds) || !(seconds > 0))
        throw std::invalid_argument(d + "gemm_points: a call with a dimension < 1 or a time that is not positive");
  }
  if (p.fp8_gemm) {
    check_figure(p.fp8_gemm->peak_flops_per_s, at + "fp8_gemm.peak_flops_per_s");
    check_figure(p.fp8_gemm->gemm_efficiency, at + "fp8_gemm.gemm_efficiency", 1.0);
  }
  check_figure(p.memory_bandwidth_bytes_per_s, at + "memory_bandwidth_bytes_per_s");
  for (const auto& [c, f] : p.op_class_bandwidth)
    check_figure(f, at + "op_class_bandwidth_bytes_per_s." + std::string(op_class_name(c)));
  for (const auto& [name, b] : p.op_bandwidth) {
    const std::string o = at + "op_bandwidth_bytes_per_s." + name;
    if (b.source.empty()) throw std::invalid_argument(o + ": no source");
    if (b.points.empty()) throw std::invalid_argument(o + ": no points");
    for (size_t i = 0; i < b.points.size(); ++i) {
      const auto& [bytes, rate] = b.points[i];
      if (bytes < 1 || !std::isfinite(rate) || !(rate > 0) || (i > 0 && bytes <= b.points[i - 1].first))
        throw std::invalid_argument(o + ": points must have ascending bytes ≥ 1 and positive rates");
    }
  }
  for (const auto& [k, f] : p.attention) {
    check_figure(f.efficiency, at + "attention." + std::string(attention_kind_name(k)) + ".efficiency", 1.0);
    if (!f.table.empty() && f.table_source.empty())
      throw std::invalid_argument(at + "attention." + std::string(attention_kind_name(k)) + ".table: no source");
  }
  check_figure(p.launch_floor_seconds, at + "launch_floor_seconds", INFINITY, true);
  check_figure(p.host_copy_bytes_per_s, at + "host_copy_bytes_per_s");
}

}  // namespace gpuledger::perf
