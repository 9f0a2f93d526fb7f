// Op time: the measured tables, the roofline and the launch floor (see op_time.h, docs/perf-model.md).
#include "perf/op_time.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace gpuledger::perf {
namespace {

const DTypeFigures& figures(const DeviceProfile& p, DType dtype) {
  const auto it = p.dtypes.find(dtype);
  if (it == p.dtypes.end())
    throw std::invalid_argument("device profile " + p.name + " has no " + std::string(dtype_name(dtype)) + " figures");
  return it->second;
}

void check_bytes(int64_t bytes, const char* what) {
  if (bytes < 0) throw std::invalid_argument(std::string(what) + ": bytes < 0 (" + std::to_string(bytes) + ")");
}

// The roofline (Williams et al. 2009) plus Hockney's floor.
double roofline_seconds(double flops, double bytes, double roof_flops_per_s, double bandwidth_bytes_per_s,
                        double floor_seconds) {
  return std::max(flops / roof_flops_per_s, bytes / bandwidth_bytes_per_s) + floor_seconds;
}

// A GEMM on the figures `f`, operands of `element_bytes` (see gemm_seconds).
double gemm_seconds_on(const DeviceProfile& p, const DTypeFigures& f, int64_t m, int64_t n, int64_t k,
                       int64_t element_bytes, int64_t batch) {
  if (m < 1 || n < 1 || k < 1 || batch < 1)
    throw std::invalid_argument("gemm_seconds: a dimension < 1 (" + std::to_string(m) + ", " + std::to_string(n) +
                                ", " + std::to_string(k) + ", batch " + std::to_string(batch) + ")");
  const double b = static_cast<double>(batch);
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * b;
  if (f.gemm) {
    // Past the grid's largest value on an axis a GEMM runs at the grid's edge:
    // more output tiles or a longer k loop of the same kernel, whose
    // efficiency does not fall with size (docs/perf-model.md "Op time").
    const auto [tm, tn, tk] = f.gemm->table.clamp_above(m, n, k);
    if (f.gemm->table.covers(tm, tn, tk)) return flops / f.gemm->table.at(tm, tn, tk);
  }
  const double bytes = (static_cast<double>(m) * k + static_cast<double>(k) * n + static_cast<double>(m) * n) *
                       static_cast<double>(element_bytes) * b;
  return roofline_seconds(flops, bytes, f.peak_flops_per_s.value * f.gemm_efficiency.value,
                          p.memory_bandwidth_bytes_per_s.value, p.launch_floor_seconds.value);
}

}  // namespace

double gemm_seconds(const DeviceProfile& p, int64_t m, int64_t n, int64_t k, DType dtype, int64_t batch) {
  return gemm_seconds_on(p, figures(p, dtype), m, n, k, dtype_bytes(dtype), batch);
}

double fp8_gemm_seconds(const DeviceProfile& p, int64_t m, int64_t n, int64_t k, int64_t batch) {
  if (!p.fp8_gemm) throw std::invalid_argument("device profile " + p.name + " has no fp8_gemm figures");
  return gemm_seconds_on(p, *p.fp8_gemm, m, n, k, 1, batch);
}

double op_bandwidth_bytes_per_s(const OpBandwidth& b, int64_t bytes) {
  const auto& pts = b.points;
  if (bytes <= pts.front().first) return pts.front().second;
  if (bytes >= pts.back().first) return pts.back().second;
  size_t i = 1;
  while (pts[i].first < bytes) ++i;
  const auto& [b0, r0] = pts[i - 1];
  const auto& [b1, r1] = pts[i];
  const double w = std::log(static_cast<double>(bytes) / static_cast<double>(b0)) /
                   std::log(static_cast<double>(b1) / static_cast<double>(b0));
  return r0 + w * (r1 - r0);
}

double op_class_bandwidth_bytes_per_s(const DeviceProfile& p, OpClass op_class) {
  const auto it = p.op_class_bandwidth.find(op_class);
  return it != p.op_class_bandwidth.end() ? it->second.value : p.memory_bandwidth_bytes_per_s.value;
}

double memory_bound_seconds(const DeviceProfile& p, int64_t bytes, OpClass op_class) {
  check_bytes(bytes, "memory_bound_seconds");
  return static_cast<double>(bytes) / op_class_bandwidth_bytes_per_s(p, op_class) + p.launch_floor_seconds.value;
}

double memory_bound_seconds(const DeviceProfile& p, int64_t bytes, std::string_view op, OpClass op_class) {
  check_bytes(bytes, "memory_bound_seconds");
  const auto it = p.op_bandwidth.find(op);
  if (it == p.op_bandwidth.end() || bytes == 0) return memory_bound_seconds(p, bytes, op_class);
  return static_cast<double>(bytes) / op_bandwidth_bytes_per_s(it->second, bytes) + p.launch_floor_seconds.value;
}

double attention_seconds(const DeviceProfile& p, AttentionKind kind, const AttentionShape& shape, double flops,
                         int64_t bytes, DType dtype) {
  check_bytes(bytes, "attention_seconds");
  if (!(flops >= 0)) throw std::invalid_argument("attention_seconds: flops < 0");
  const DTypeFigures& f = figures(p, dtype);
  const auto it = p.attention.find(kind);
  double efficiency = f.gemm_efficiency.value;
  if (it != p.attention.end()) {
    if (it->second.table.covers(shape.seq, shape.heads, shape.head_dim))
      return flops / it->second.table.at(shape.seq, shape.heads, shape.head_dim);
    efficiency = it->second.efficiency.value;
  }
  return roofline_seconds(flops, static_cast<double>(bytes), f.peak_flops_per_s.value * efficiency,
                          p.memory_bandwidth_bytes_per_s.value, p.launch_floor_seconds.value);
}

double host_copy_seconds(const DeviceProfile& p, int64_t bytes) {
  check_bytes(bytes, "host_copy_seconds");
  return static_cast<double>(bytes) / p.host_copy_bytes_per_s.value + p.launch_floor_seconds.value;
}

double op_seconds(const DeviceProfile& p, const OpCost& op) {
  switch (op.kind) {
    case OpCostKind::kGemm:
      if (op.m == 0 || op.n == 0 || op.batch == 0) return 0;
      if (op.k == 0) return memory_bound_seconds(p, op.bytes, OpClass::kCopy);
      if (const auto f = p.dtypes.find(op.dtype); f != p.dtypes.end()) {
        const auto& measured = f->second.gemm_points.seconds;
        const auto it =
            measured.find(GemmCall{op.m, op.n, op.k, op.batch, op.trans_a, op.trans_b, op.c_dtype, op.accumulate});
        if (it != measured.end()) return it->second;
      }
      if (op.fp8 && p.fp8_gemm) return fp8_gemm_seconds(p, op.m, op.n, op.k, op.batch);
      return gemm_seconds(p, op.m, op.n, op.k, op.dtype, op.batch);
    case OpCostKind::kFlashAttention:
      if (op.flops == 0 && op.bytes == 0) return 0;
      return attention_seconds(p, AttentionKind::kFlash, {op.seq, op.heads, op.head_dim}, static_cast<double>(op.flops),
                               op.bytes, op.dtype);
    case OpCostKind::kMemoryBound: return memory_bound_seconds(p, op.bytes, op.name, op.op_class);
    case OpCostKind::kHostCopy: return host_copy_seconds(p, op.bytes);
  }
  throw std::invalid_argument("op_seconds: unknown kind of " + std::string(op.name));
}

}  // namespace gpuledger::perf
