// Serve-plan record → report JSON: {"command": "serve-plan", "config": {...,
// "serving": {qps, prompt_tokens, output_tokens, kv_sizing_tokens,
// kv_sizing_basis, headroom, ttft_ms, tpot_ms, mbu, mfu, memory_utilization,
// cuda_context_bytes, prefill_chunk}}, "devices": [{name, memory_bytes,
// bandwidth_bytes_per_s, peak_flops, terms: {weights_bytes, activation_bytes,
// cublas_workspace_bytes, cuda_context_bytes}, single: POINT, plan: POINT |
// null}]}, a POINT being analytic::ServingPoint's fields (docs/report.md).
#pragma once
#include <nlohmann/json.hpp>

#include "bench/record/serve_plan_record.h"

namespace gpuledger::report {

nlohmann::json serve_plan_report_json(const run::ServePlanRecord& record);

}  // namespace gpuledger::report
