// DeviceProfile: what one device achieves — the typed form the performance
// model computes with (perf/op_time.h). JSON only at the edge
// (perf/profile_json.h, schema gpuledger.device_profile/1, docs/perf-model.md).
// Every figure carries its source (perf/sourced.h). No formulas here.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/step_program.h"  // OpClass
#include "perf/shape_table.h"
#include "perf/sourced.h"

namespace gpuledger::perf {

// Bandwidth-bound op classes (core/step_program.h says which ops each holds),
// each of which may have its own achieved bandwidth (a norm reads and writes
// once, an optimizer update streams four fp32 states, a copy is a copy).
using gpuledger::OpClass;
std::string_view op_class_name(OpClass c);  // "norm", "activation", "softmax", "optimizer", "copy"
std::optional<OpClass> parse_op_class(std::string_view name);
inline constexpr OpClass kAllOpClasses[] = {OpClass::kNorm, OpClass::kActivation, OpClass::kSoftmax,
                                            OpClass::kOptimizer, OpClass::kCopy};

// A GEMM table: C (m×n) = op(A) (m×k) · op(B) (k×n), with the transposes it
// was measured with (a linear layer's forward is A · Bᵀ: trans_b).
struct GemmTable {
  bool trans_a = false, trans_b = true;
  ShapeTable table;  // (m, n, k) → FLOP/s
  std::string source;
  bool operator==(const GemmTable&) const = default;
};

// One GEMM call as a step issues it: `batch` products C (m×n) = op(A) (m×k) ·
// op(B) (k×n) in one call, C in c_dtype, added to C's contents when `accumulate`.
struct GemmCall {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  bool trans_a = false, trans_b = false;
  DType c_dtype = DType::kFP32;
  bool accumulate = false;
  auto operator<=>(const GemmCall&) const = default;
};

// GEMMs measured at exactly the calls a run issues (`gpuledger calibrate
// --for`): the seconds of one call. Where a call is here it is priced by its
// own measurement; the grid interpolates between shapes and cannot see what
// a shape's transposes, batch or a dimension that tiles badly cost.
struct GemmPoints {
  std::map<GemmCall, double> seconds;
  std::string source;
  bool operator==(const GemmPoints&) const = default;
};

// What one operand dtype achieves in GEMMs.
struct DTypeFigures {
  Sourced peak_flops_per_s;  // dense peak (a datasheet, or the CPU's cores × FMA × clock)
  Sourced gemm_efficiency;   // fraction of the peak a large GEMM reaches (the roofline's compute roof)
  std::optional<GemmTable> gemm;
  GemmPoints gemm_points;  // may be empty
  bool operator==(const DTypeFigures&) const = default;
};

// One bandwidth-bound op's achieved bandwidth by the bytes it moves, measured
// on the op itself: (bytes, bytes/s) points in ascending bytes. Ops of one
// class differ several-fold (a tanh GELU against an add) and one op's rate
// changes with size (cache-resident or streaming), which one class figure
// cannot follow.
struct OpBandwidth {
  std::vector<std::pair<int64_t, double>> points;
  std::string source;
  bool operator==(const OpBandwidth&) const = default;
};

enum class AttentionKind { kFlash, kMaterialized };
std::string_view attention_kind_name(AttentionKind k);  // "flash", "materialized"
std::optional<AttentionKind> parse_attention_kind(std::string_view name);

// Attention of one kind: the fraction of the dtype's peak its FLOPs run at,
// and optionally a measured table over (seq, heads, head_dim).
struct AttentionFigures {
  Sourced efficiency;
  ShapeTable table;  // (seq, heads, head_dim) → FLOP/s; may be empty
  std::string table_source;
  bool operator==(const AttentionFigures&) const = default;
};

struct DeviceProfile {
  std::string name;                                       // "h100-sxm", or the host's name when measured
  nlohmann::json fingerprint = nlohmann::json::object();  // free-form: CPU/GPU, BLAS, threads, driver
  Provenance provenance;
  std::map<DType, DTypeFigures> dtypes;
  // (optional) FP8 GEMMs: the FP8 tensor-core peak and efficiency a GEMM with
  // FP8 operands runs at. Absent, such a GEMM is priced as the wider GEMM the
  // CPU backend emulates it with (its ab dtype's figures).
  std::optional<DTypeFigures> fp8_gemm;
  Sourced memory_bandwidth_bytes_per_s;                          // achieved, for any bandwidth-bound op
  std::map<OpClass, Sourced> op_class_bandwidth;                 // (optional) per class, overriding the one figure
  std::map<std::string, OpBandwidth, std::less<>> op_bandwidth;  // (optional) per op name, overriding its class
  std::map<AttentionKind, AttentionFigures> attention;
  Sourced launch_floor_seconds;   // the least time any op takes
  Sourced host_copy_bytes_per_s;  // host ↔ device, per direction
  bool operator==(const DeviceProfile& o) const {
    return name == o.name && fingerprint == o.fingerprint && provenance == o.provenance && dtypes == o.dtypes &&
           fp8_gemm == o.fp8_gemm && memory_bandwidth_bytes_per_s == o.memory_bandwidth_bytes_per_s &&
           op_class_bandwidth == o.op_class_bandwidth && op_bandwidth == o.op_bandwidth && attention == o.attention &&
           launch_floor_seconds == o.launch_floor_seconds && host_copy_bytes_per_s == o.host_copy_bytes_per_s;
  }
};

// Throws std::invalid_argument naming the first figure that is missing its
// source, not positive and finite (efficiencies in (0, 1]; the launch floor
// may be 0), or a profile without a name, provenance or dtype.
void validate_device_profile(const DeviceProfile& p);

}  // namespace gpuledger::perf
