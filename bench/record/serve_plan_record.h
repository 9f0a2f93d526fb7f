// The request and record of `serve-plan`: the model, the request rate and
// lengths or a trace, the targets and the devices asked about, and per device
// the serving plan (analytic/serving_plan.h) with the memory terms it was given.
// bench/run/serve_plan_run.h fills them and bench/report/serve_plan_json.h
// writes them; the types sit below both, so that report/ needs nothing of run/.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analytic/serving_plan.h"
#include "core/device_spec.h"
#include "core/resolved_config.h"

namespace gpuledger::run {

struct ServePlanRequest {
  ResolvedConfig config;  // the model and dtype (tp = 1: the plan chooses t)
  double qps = 0;
  double prompt_tokens = 0, output_tokens = 0;       // means (from the trace when one is given)
  std::optional<std::vector<int64_t>> trace_totals;  // total lengths: the KV is sized at their percentile
  std::string trace_source;
  double percentile = 95;
  double headroom = 1.2;
  std::optional<double> ttft_ms, tpot_ms;
  std::vector<DeviceSpec> devices;
  double mbu = 0.6, mfu = 0.5;
  double memory_utilization = 0.9;  // vLLM's gpu_memory_utilization default (vllm/config/cache.py)
  int64_t cuda_context_bytes = 0;
  int64_t prefill_chunk = 2048;  // tokens of the activation peak
};

// The memory terms of one device beside the weights and KV.
struct ServeMemoryTerms {
  int64_t activation_bytes = 0;        // one prefill chunk's forward (bench/run/kv_run.h estimate)
  int64_t cublas_workspace_bytes = 0;  // PyTorch's default cuBLAS workspace for the device's architecture
  int64_t cuda_context_bytes = 0;
};

struct ServeDeviceRecord {
  DeviceSpec spec;
  ServeMemoryTerms terms;
  analytic::ServingDevice device;  // what the plan was computed with
  analytic::ServingPlan plan;
};

struct ServePlanRecord {
  ServePlanRequest request;
  analytic::ServingDemand demand;
  analytic::ServingModel model;
  std::string kv_sizing_basis;  // "mean (prompt + output)" or "p95 of trace PATH"
  std::vector<ServeDeviceRecord> devices;
};

}  // namespace gpuledger::run
