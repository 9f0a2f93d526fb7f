// Attention's measured throughput on the CPU backend, per kind, over a
// (seq, heads, head_dim) grid shaped like the small models' attention: the
// tables of perf/device_profile.h AttentionFigures.
//
//   flash         Device::flash_attention_forward, then _backward (causal,
//                 no dropout); FLOPs kernels/flop_counts.h flash_forward_flops
//                 + flash_backward_flops (the full T×T products).
//   materialized  the core as models/transformer/attention.cpp runs it without
//                 dropout and with one query head per KV head: S = Q·Kᵀ (fp32),
//                 softmax, ctx = P·V; then dP = dctx·Vᵀ, dV = Pᵀ·dctx, the
//                 softmax backward, dS rounded to the dtype when 16-bit,
//                 dQ = dS·K, dK = dSᵀ·Q. FLOPs: those six GEMMs' gemm_flops.
//                 Its time includes the softmax and the rounding: the table
//                 prices the whole core per FLOP of its GEMMs.
//
// A point's throughput is the forward's and the backward's FLOPs over their
// two times together: a training step runs one of each per layer, so the pair
// is what a prediction sums (a recomputed forward adds a forward, which the
// pair's rate prices within the forward/backward difference). One sample
// (B = 1); the median of fixed repetitions of each pass. The kind's
// efficiency — the roofline's rate outside the grid — is the table's best
// point over the dtype's peak, as the GEMM efficiency is the best GEMM's.
//
// The profile's tables carry no dtype (perf's schema): they are measured in
// one dtype, the first the calibration measures GEMMs in.
#pragma once
#include <cstdint>
#include <map>
#include <ostream>
#include <vector>

#include "core/dtype.h"
#include "kernels/device.h"
#include "perf/device_profile.h"

namespace gpuledger::bench {

struct AttentionCalibration {
  DType dtype = DType::kFP32;
  std::vector<int64_t> seqs = {128, 256, 512, 1024}, heads = {4, 8}, head_dims = {16, 32, 64};
  int warmup = 1, reps = 3;
};
AttentionCalibration quick_attention_calibration();

// Both kinds' figures; `peak_flops_per_s` is the dtype's peak the
// efficiencies are taken against.
std::map<perf::AttentionKind, perf::AttentionFigures> calibrate_attention(Device& dev, const AttentionCalibration& c,
                                                                          double peak_flops_per_s,
                                                                          std::ostream& progress);

}  // namespace gpuledger::bench
