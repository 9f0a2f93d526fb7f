// The request and record of `infer`: the cache, the requests to serve and the
// serving memory rule asked for, and what serving measured per rank and on the
// reporting rank, beside the analytic figures. bench/run/infer_run.h fills them
// and bench/report/infer_json.h writes them (kind "infer"); the types sit below
// both, so that report/ needs nothing of run/.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analytic/kv_cache.h"
#include "bench/host_cpu.h"
#include "core/account.h"
#include "core/resolved_config.h"
#include "kernels/torch_caching_allocator.h"
#include "models/transformer/infer_engine.h"
#include "models/transformer/infer_latency.h"

namespace gpuledger::run {

struct InferRequest {
  ResolvedConfig config;        // device memory required
  std::string backend = "cpu";  // cpu | meta | cuda
  analytic::KvOptions kv;
  std::vector<RequestShape> shapes;     // the requests served
  int64_t prompt_len = 0, gen_len = 0;  // as given (the report shows them)
  std::string trace;                    // the trace file they came from, if any
  int64_t context = 0;                  // tokens per sequence of the capacity
  int64_t max_batch = 256;
  // max_num_batched_tokens, the step's token budget; for a gpt model at most its max_seq
  int64_t prefill_chunk = 2048;
  int64_t prefix_len = 0;                // prompt tokens every request shares (the prompts are made so)
  bool prefix_caching = true;            // by block hash (paged, no window)
  std::string preemption = "recompute";  // recompute | swap (paged: blocks to host memory and back)
  std::optional<double> arrival_rate;  // Poisson arrivals (requests/s) given to the shapes, seeded with the run's seed
  int64_t kv_outliers = 0;
  double memory_utilization = 0.9;
  int64_t overhead_bytes = 0;
  std::optional<double> peak_flops;
};

// What decode throughput is taken against.
// On the cpu also the hardware peak (cores × FMA width × clock, bench/host_cpu.h).
struct InferPeaks {
  std::optional<double> flops, bandwidth, hardware_flops;
  std::string flops_source, bandwidth_source, hardware_source;
  std::optional<bench::CpuHardwarePeak> hardware_cpu;  // one CPU of it: measured FMA, table, cross-check
};

// One serving rank: its ledger, KV cache and capacity beside the analytic figures.
struct InferRankRecord {
  int64_t rank = 0;  // its tp coordinate too (dp = pp = 1)
  // False when the rank failed before serving finished: the record is its rank alone.
  bool served = false;
  int64_t peak_bytes = 0;
  AccountBytes at_peak, peak_by_account;
  int64_t activation_peak_bytes = 0;  // profiled prefill workspace
  int64_t pool_rule_bytes = 0;        // the KV pool the serving rule gives
  int64_t kv_booked_bytes = 0;        // the KV account's peak in the ledger
  int64_t kv_peak_assigned_bytes = 0, kv_peak_token_bytes = 0;
  int64_t waste_bytes = 0;          // assigned − tokens, the null block and fixed scales left out
  bool paged = false;               // the waste is block rounding (else reservation)
  int64_t context = 0;              // tokens per sequence of the capacity
  int64_t capacity_measured = 0;    // sequences that fit, filling the pool
  int64_t assigned_bytes_full = 0;  // assigned when that full
  analytic::KvCapacity predicted;
  int64_t analytic_weights_bytes = 0, analytic_kv_full_bytes = 0, analytic_kv_bytes_per_token = 0;
  int64_t analytic_activation_bytes = 0;  // the profiled prefill's temporaries (analytic/inference.h)
  int64_t executed_flops = 0;
  std::optional<TorchMemoryReplay> torch;  // the rank's allocations through PyTorch's caching allocator
};

// The KV dtype's attention error against a bf16 cache (a side run of one decode step).
struct KvErrorRecord {
  double rms = 0, max = 0, reference_rms = 0;
  int64_t context = 0, outlier_channels = 0;
};

// The KV budget's output error against a full cache (models/transformer/kv_policy_error.h).
struct KvPolicyErrorRecord {
  bool computed = false;
  int64_t sequences = 0, positions = 0;
  double rms = 0, max = 0, reference_rms = 0, top1_agreement = 1.0;
  std::string note;
};

// A MoE model's decode steps: the distinct experts each layer routed to and
// the weight bytes read, measured beside the uniform-routing model
// (analytic/inference.h expected_distinct_experts, decode_weight_bytes_expected).
struct MoeDecodeRecord {
  int64_t decode_steps = 0, layers = 0, experts = 0, top_k = 0;
  double experts_per_layer_step = 0, experts_per_layer_step_modeled = 0;  // means over the decode steps
  double weight_bytes_per_step = 0, weight_bytes_per_step_modeled = 0;
  int64_t expert_weight_bytes = 0;  // one expert's gate, up and down
};

// The serving engine's figures on the reporting rank.
struct InferServingRecord {
  std::optional<MoeDecodeRecord> moe;  // a MoE model with decode steps
  EngineStats stats;
  int64_t kv_bytes_per_token = 0;
  int64_t kv_scale_bytes_per_token = 0;  // of kv_bytes_per_token: the scales stored beside each token
  int64_t capacity_sequences = 0, capacity_predicted = 0;
  std::optional<KvErrorRecord> kv_error;               // none for a bf16 cache
  std::optional<KvPolicyErrorRecord> kv_policy_error;  // none without a KV budget
  int64_t evicted_tokens = 0;                          // tokens given up under the KV budget
  bool computed = true;                                // false on the meta backend: times and tokens mean nothing
  std::optional<LatencySummary> latency;               // none when the engine had no clock (meta without device peaks)
  int64_t host_swap_peak_bytes = 0;                    // the rank ledger's `host` peak: swapped KV (--preemption swap)
  std::string clock;                                   // what the engine clock is
};

struct InferRecord {
  InferRequest request;
  std::string device_description;
  InferPeaks peaks;
  std::string status = "ok";  // ok | oom: the first failing rank's
  std::string error;
  // Every rank's record (rank 0 of an MPI job); on one rank, only once it served.
  std::vector<InferRankRecord> ranks;
  nlohmann::json checks = nlohmann::json::array();  // every rank's
  std::optional<InferServingRecord> serving;        // the reporting rank's, when it served
  std::optional<int> exit_without_report;           // an MPI rank other than 0
};

}  // namespace gpuledger::run
