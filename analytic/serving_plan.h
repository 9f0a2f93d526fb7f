// Serving capacity: the length a KV cache is sized at (a percentile of the
// requests' total lengths, times a headroom factor), the decode step from the
// memory roofline, the concurrency a request rate needs by Little's law, and
// whether a device (or t-way tensor parallelism, or r replicas) holds it.
// Pure functions; the derivations and a worked case are in docs/serving-plan.md.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpuledger::analytic {

// The p-th percentile (0 < p <= 100) of `values` by the nearest-rank method
// (Hyndman & Fan 1996, definition 1): the smallest value with at least p% of
// the values at or below it, i.e. sorted[ceil(p/100 · n) − 1]. A value of the
// data, never an interpolation, so a capacity is a real request's length.
// Throws std::invalid_argument for an empty list or p outside (0, 100].
int64_t percentile_nearest_rank(std::vector<int64_t> values, double p);
// Arithmetic mean; throws std::invalid_argument for an empty list.
double mean_of(const std::vector<int64_t>& values);
// ceil(x · headroom) for headroom >= 1: "keep 20% headroom" is headroom 1.2.
int64_t with_headroom(int64_t x, double headroom);

// What the plan is asked to serve.
struct ServingDemand {
  double qps = 0;                // arrivals per second (λ)
  double prompt_tokens = 0;      // mean prompt length
  double output_tokens = 0;      // mean generated length
  int64_t kv_sizing_tokens = 0;  // tokens per sequence the KV is sized at (mean or a percentile total)
  double headroom = 1.2;         // multiplies the concurrency the KV is sized for
  std::optional<double> ttft_s;  // target time to first token
  std::optional<double> tpot_s;  // target time per output token
};

// The model, whole (not per rank): a TP degree divides weights and KV.
struct ServingModel {
  int64_t params = 0;  // every parameter held (a MoE model: all experts)
  int64_t weight_bytes = 0;
  int64_t kv_bytes_per_token = 0;  // all layers, all KV heads
  int64_t kv_heads = 0;            // TP degrees must divide it (or the heads replicate past it)
  int64_t heads = 0;               // TP degrees must divide the attention heads
  int64_t active_params = 0;       // the parameters a token passes through (FLOPs: 2 per token each); 0: params
  // Each layer's sliding window (none: full attention); empty: every layer
  // full. A sliding layer keeps at most its window of a sequence's tokens.
  std::vector<std::optional<int64_t>> layer_windows = {};
};

// The tokens' worth of whole-model KV (kv_bytes_per_token each) a sequence of
// `tokens` keeps: (1/L) Σ_l min(tokens, window_l); `tokens` when every layer is full.
double kv_kept_tokens(const ServingModel& m, double tokens);

// One device and how it is assumed to run.
struct ServingDevice {
  std::string name;
  int64_t memory_bytes = 0;
  double bandwidth_bytes_per_s = 0;
  std::optional<double> peak_flops;  // dense, the serving dtype; unknown: prefill time not counted
  double mbu = 0.6;                  // achieved / peak bandwidth in decode (assumed unless measured)
  double mfu = 0.5;                  // achieved / peak FLOP/s in prefill (assumed unless measured)
  double memory_utilization = 0.9;   // vLLM gpu_memory_utilization: the share of memory the engine may use
  int64_t cuda_context_bytes = 0;    // the CUDA context: outside the engine's share, inside the device
  int64_t workspace_bytes = 0;       // activation peak of a prefill chunk + library workspaces, per device
};

// One configuration: t-way tensor parallelism in each of r replicas.
struct ServingPoint {
  int64_t tp = 1, replicas = 1;
  double replica_qps = 0;            // λ / r
  double prefill_s = 0;              // one mean prompt's prefill: 2·P·prompt / (t · peak · mfu); 0 if peak unknown
  double decode_fixed_s = 0;         // a: weights/t / (bw · mbu)
  double decode_per_seq_s = 0;       // b: kv(prompt + output/2)/t / (bw · mbu), per sequence in the batch
  double decode_flop_per_seq_s = 0;  // c: 2·P / (t · peak · mfu), per sequence (compute roof)
  bool stable = false;               // λ_r · n_out · max(b, c) < 1: the decode keeps up at all
  double concurrency = 0;            // L = λ_r · W (Little's law), solved with TPOT(L)
  double tpot_s = 0;                 // max(a + b·L, c·L)
  double time_in_system_s = 0;       // W = prefill + n_out · TPOT
  int64_t sized_sequences = 0;       // ceil(L · headroom)
  int64_t kv_bytes = 0;              // per device: sized_sequences · kv_sizing_tokens · kv/token / t
  int64_t need_bytes = 0;            // per device: weights/t + kv + workspace
  int64_t usable_bytes = 0;          // per device: min(utilization · memory, memory − CUDA context)
  bool fits = false;                 // stable, need <= usable, and the targets met
  bool meets_ttft = true, meets_tpot = true;
};

// The point at (t, r). Throws std::invalid_argument for a non-positive rate,
// length, bandwidth or memory, or t, r < 1.
ServingPoint serving_point(const ServingDemand& d, const ServingModel& m, const ServingDevice& dev, int64_t tp,
                           int64_t replicas);

struct ServingPlan {
  ServingPoint single;                 // t = 1, r = 1: does one device do it?
  std::optional<ServingPoint> chosen;  // fewest devices t·r (ties: smaller t); none within the limits
};
// Tries t in {1, 2, 4, 8} (t must divide the heads) and r = 1 .. max_replicas.
ServingPlan plan_serving(const ServingDemand& d, const ServingModel& m, const ServingDevice& dev,
                         int64_t max_replicas = 4096);

}  // namespace gpuledger::analytic
