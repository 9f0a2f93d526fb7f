// Activation bytes: the exact per-layer and per-stage figures of
// docs/exact-budget.md and the six rows of Korthikanti et al. 2022, Table 2.
#pragma once
#include <cstdint>
#include <vector>

#include "analytic/published.h"
#include "core/layout.h"
#include "core/model_config.h"
#include "core/run_config.h"

namespace gpuledger::analytic {

// Exact bytes one layer saves for one microbatch on one TP rank: global
// layer `layer` (a MoE model's first dense_layers hold the dense MLP), and
// per_layer the last layer's (every layer's but those dense ones).
int64_t activation_bytes_of_layer(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t layer);
int64_t activation_bytes_per_layer(const ModelConfig& m, const Layout& l, const RunConfig& r);
// The sum of activation_bytes_of_layer over the layers `stage` holds.
int64_t activation_bytes_of_stage_layers(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t stage);
// Of which the norm statistics (fp32 mean/rstd) — Table 2 ignores them.
int64_t norm_stat_bytes_per_layer(const ModelConfig& m, const Layout& l, const RunConfig& r);
// Stage extras per microbatch (token ids, embedding mask; final norm, logits, targets).
int64_t activation_stage_extra_bytes(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t stage);
// One microbatch's saved bytes on a stage (layers + extras).
int64_t activation_bytes_per_microbatch(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t stage);
// The activations account at its peak on `stage` (in-flight × per microbatch).
int64_t activation_peak_bytes(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t stage);

// Korthikanti et al. 2022, Table 2, per layer per microbatch, bytes (16-bit,
// 1-byte masks, norm statistics ignored). s, b, h, a as the paper; t = tp.
enum class KorthikantiRow {
  kNoParallel,
  kTensor,
  kTensorSequence,
  kTensorSelective,
  kTensorSequenceSelective,
  kFullRecompute
};
double korthikanti_per_layer_bytes(KorthikantiRow row, double s, double b, double h, double a, double t);
// The row matching this run (tp/sp/recompute) and its whole-stage figure with the
// pipeline rule (first stage: L layers' worth × min(1, m/p), Eq. 5; other stages
// in-flight × L_i layers), plus the row-wise table for reports.
std::vector<Published> published_activations(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t stage);

}  // namespace gpuledger::analytic
