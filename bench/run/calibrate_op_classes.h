// What the CPU backend achieves on its bandwidth-bound ops, one figure per op
// class (perf/device_profile.h OpClass), measured on the ops themselves
// (make_device("cpu")) rather than taken from the read STREAM: a norm or an
// activation on the CPU computes as it streams (exp, tanh, rsqrt), and its
// rows fork an OpenMP region per call, so it runs well below STREAM.
//
//   norm        LayerNorm and RMSNorm, forward and backward
//   activation  GELU and SwiGLU forward and backward, dropout forward and
//               backward, the residual add, bias add and backward, RoPE
//   softmax     the materialized attention's softmax forward and backward,
//               cross-entropy forward and backward
//   optimizer   the AdamW update (an fp32 master with 16-bit weights), Σx²
//   copy        convert (fp32 ↔ 16-bit), Device::copy, merge_heads, split_qkv
//
// Each op's bytes are its least traffic (kernels/op_bytes.h), the same
// count a prediction prices an op with. Each point: the median of fixed
// repetitions after a warm-up.
//
// In one dtype, the run's: the CPU kernels compute every element in fp32
// (16-bit operands widened and rounded), so they are bound by elements per
// second more than by bytes, and a bf16 op moves half the bytes of its fp32
// twin in about the same time (on the machine docs/perf-model.md names, bf16
// norms and activations reach about half of fp32's bytes/s). One figure for
// both would be wrong by that factor for each; a profile for bf16 runs is
// measured in bf16. (Cross-entropy's logits are fp32 in every run.)
//
// One figure per class. At each size, the bandwidth at which the class's ops,
// priced as the model prices them (perf/op_time.h memory_bound_seconds:
// bytes / β + t_floor, the profile's launch floor), sum to their measured
// time: β_s = Σ bytes / Σ (t − t_floor). A step's time is a sum of its ops,
// and the ops of a class differ several-fold on the CPU (a tanh GELU computes
// more per byte than an add), so the figure that makes a sum right is the
// sum's own rate, not a typical op's: with a layer's ops in the measured
// proportions, the predicted sum is the measured one. Then the median of β_s
// over the sizes: the sizes span the small models' layers (a small one
// cache-resident, a large one streaming), and the median keeps a noisy or
// outlying size from setting the figure.
#pragma once
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "kernels/device.h"
#include "perf/device_profile.h"

namespace gpuledger::bench {

struct OpClassCalibration {
  DType dtype = DType::kFP32;
  // (rows, columns) of the norms, activations and cross-entropy, shaped like
  // the small models' layers (tokens × hidden); rows · columns elements for
  // the optimizer and copy ops.
  std::vector<std::pair<int64_t, int64_t>> shapes = {{64, 256}, {256, 512}, {1024, 768}, {4096, 1024}};
  // The softmax's scores: one sample of `softmax_heads` heads at each length.
  std::vector<int64_t> softmax_seqs = {128, 256, 512, 1024};
  int64_t softmax_heads = 8;
  int warmup = 1, reps = 5;
};
OpClassCalibration quick_op_class_calibration();

// One op timed at one size.
struct OpTiming {
  perf::OpClass op_class = perf::OpClass::kCopy;
  std::string op;  // "layernorm_forward", …
  DType dtype = DType::kFP32;
  int64_t bytes = 0;  // kernels/op_bytes.h
  double seconds = 0;
  int size_index = 0;  // which of the calibration's sizes (shapes[i], softmax_seqs[i])
};

std::vector<OpTiming> time_op_classes(Device& dev, const OpClassCalibration& c, std::ostream& progress);

// β of `op_class` from its timings with the floor (see above): the median
// over sizes of Σ bytes / Σ (t − floor); 0 when the class has no timing or
// no size's times exceed their floors.
double fit_class_bandwidth(const std::vector<OpTiming>& timings, perf::OpClass op_class, double floor_seconds);

// Every class's β with its source ("measured by gpuledger calibrate: …",
// naming the ops, sizes, dtype and the fit). Throws std::runtime_error for a
// class whose fit is not positive.
std::map<perf::OpClass, perf::Sourced> op_class_bandwidths(const std::vector<OpTiming>& timings,
                                                           const OpClassCalibration& c, double floor_seconds,
                                                           const std::string& device_description);

// The name a step program reports a timed op under (core/step_program.h
// OpCost::name): "adamw" is "optimizer_update", both conversions "convert".
std::string_view op_cost_name(std::string_view timed);

// Each op's own bandwidth by size (perf/device_profile.h OpBandwidth), keyed
// by op_cost_name: at each size, Σ bytes / Σ (t − floor) of the timings
// sharing the name (the two conversions together, as a step reports both as
// "convert"), at their mean bytes.
std::map<std::string, perf::OpBandwidth, std::less<>> op_bandwidths(const std::vector<OpTiming>& timings,
                                                                    const OpClassCalibration& c, double floor_seconds,
                                                                    const std::string& device_description);

}  // namespace gpuledger::bench
