// The time of one op on a device profile — every formula of op time is in
// op_time.cpp, derived in docs/perf-model.md. The FLOPs and bytes of an op
// are the caller's (what the meta backend books: kernels/flop_counts.h is
// their one definition); this file only turns them into seconds.
//
// GEMM: the measured table where it covers the shape (interpolated, perf/
// shape_table.h; a dimension past the grid's largest taken at the grid's
// edge), else — a dimension below the grid, or no table — the roofline (Williams, Waterman and Patterson,
// "Roofline: an insightful visual performance model for multicore
// architectures", CACM 52(4), 2009) plus the launch floor:
//   t = max(flops / (peak · efficiency), bytes / bandwidth) + t_floor
// The floor is Hockney's half-performance term (R. W. Hockney, "The Science
// of Computer Benchmarking", SIAM 1996, §1: t = (n + n½)/r∞): with it a small
// GEMM reaches half the compute roof at flops = t_floor · peak · efficiency —
// the fall of efficiency for small shapes. A table point is measured time
// and already holds the launch, so it gets no floor.
#pragma once
#include <cstdint>
#include <string_view>

#include "core/dtype.h"
#include "core/step_program.h"
#include "perf/device_profile.h"

namespace gpuledger::perf {

// C (m×n) = A (m×k) · B (k×n), operands and result in `dtype` (the compute
// dtype; accumulation in fp32 is inside the peak). Roofline bytes: A, B read
// once and C written once, (m·k + k·n + m·n) · dtype bytes — the least
// traffic, which cuBLAS reaches when the tiles fit. Throws
// std::invalid_argument for a dimension < 1 or a dtype without figures.
// `batch` GEMMs of the shape in one call (a batched GEMM: one launch, batch
// times the FLOPs and bytes).
double gemm_seconds(const DeviceProfile& p, int64_t m, int64_t n, int64_t k, DType dtype, int64_t batch = 1);
// The same GEMM with FP8 operands (1 byte each) on the profile's fp8_gemm
// figures: the roofline at the FP8 peak · efficiency (or their table). Throws
// std::invalid_argument when the profile has none.
double fp8_gemm_seconds(const DeviceProfile& p, int64_t m, int64_t n, int64_t k, int64_t batch = 1);

// A bandwidth-bound op moving `bytes` (read + written): bytes / bandwidth +
// t_floor, the op class's achieved bandwidth when the profile has one, else
// the one memory figure.
double memory_bound_seconds(const DeviceProfile& p, int64_t bytes, OpClass op_class);
double op_class_bandwidth_bytes_per_s(const DeviceProfile& p, OpClass op_class);
// The op `op` ("add", "rmsnorm_forward", …) moving `bytes`: at the op's own
// measured bandwidth when the profile has it (op_bandwidth: interpolated
// linearly in log bytes between its points, its first or last point's rate
// outside them), else at its class's (above); plus t_floor.
double memory_bound_seconds(const DeviceProfile& p, int64_t bytes, std::string_view op, OpClass op_class);
double op_bandwidth_bytes_per_s(const OpBandwidth& b, int64_t bytes);

struct AttentionShape {
  int64_t seq = 0, heads = 0, head_dim = 0;
};
// Attention of `kind` doing `flops` (flash_forward_flops / flash_backward_flops
// or the materialized GEMMs' count) and moving `bytes`: the kind's table where
// it covers (seq, heads, head_dim), else the roofline at the kind's
// efficiency plus the floor. A kind absent from the profile runs at the
// dtype's GEMM efficiency (its work is GEMMs).
double attention_seconds(const DeviceProfile& p, AttentionKind kind, const AttentionShape& shape, double flops,
                         int64_t bytes, DType dtype);

// A copy of `bytes` between host and device memory, one direction:
// bytes / host_copy_bandwidth + t_floor.
double host_copy_seconds(const DeviceProfile& p, int64_t bytes);

// One op as the step program reports it (core/step_program.h): a GEMM by its
// own measurement when the dtype's gemm_points hold the call (shape, batch
// and transposes), else an FP8 GEMM (OpCost::fp8) by fp8_gemm_seconds when
// the profile has fp8_gemm figures, else by gemm_seconds (a GEMM with k = 0 only writes C:
// memory-bound, copy class),
// flash and cached attention by attention_seconds (kFlash), a memory-bound op
// by memory_bound_seconds at its own figure or its class's, a host copy by host_copy_seconds. An
// op with no work (m, n or batch 0) takes no time.
double op_seconds(const DeviceProfile& p, const OpCost& op);

}  // namespace gpuledger::perf
