// Serve-plan record → report JSON (see serve_plan_json.h).
#include "bench/report/serve_plan_json.h"

#include "bench/report/report.h"

namespace gpuledger::report {

using nlohmann::json;

namespace {

json point_json(const analytic::ServingPoint& p) {
  return {{"tp", p.tp},
          {"replicas", p.replicas},
          {"devices", p.tp * p.replicas},
          {"replica_qps", p.replica_qps},
          {"prefill_s", p.prefill_s},
          {"decode_fixed_s", p.decode_fixed_s},
          {"decode_per_seq_s", p.decode_per_seq_s},
          {"decode_flop_per_seq_s", p.decode_flop_per_seq_s},
          {"stable", p.stable},
          {"concurrency", p.concurrency},
          {"tpot_s", p.tpot_s},
          {"time_in_system_s", p.time_in_system_s},
          {"sized_sequences", p.sized_sequences},
          {"kv_bytes", p.kv_bytes},
          {"need_bytes", p.need_bytes},
          {"usable_bytes", p.usable_bytes},
          {"meets_ttft", p.meets_ttft},
          {"meets_tpot", p.meets_tpot},
          {"fits", p.fits}};
}

}  // namespace

json serve_plan_report_json(const run::ServePlanRecord& rec) {
  const auto& q = rec.request;
  json doc = make_report("serve-plan");
  doc["env"]["backend"] = "analytic";
  doc["config"] = config_json(q.config);
  doc["config"]["serving"] = {{"qps", q.qps},
                              {"prompt_tokens", rec.demand.prompt_tokens},
                              {"output_tokens", rec.demand.output_tokens},
                              {"kv_sizing_tokens", rec.demand.kv_sizing_tokens},
                              {"kv_sizing_basis", rec.kv_sizing_basis},
                              {"headroom", q.headroom},
                              {"ttft_ms", optional_json(q.ttft_ms)},
                              {"tpot_ms", optional_json(q.tpot_ms)},
                              {"mbu", q.mbu},
                              {"mfu", q.mfu},
                              {"memory_utilization", q.memory_utilization},
                              {"cuda_context_bytes", q.cuda_context_bytes},
                              {"prefill_chunk", q.prefill_chunk}};
  doc["model"] = {{"params", rec.model.params},
                  {"weight_bytes", rec.model.weight_bytes},
                  {"kv_bytes_per_token", rec.model.kv_bytes_per_token}};
  doc["devices"] = json::array();
  for (const auto& d : rec.devices) {
    json dj = {{"name", d.spec.name},
               {"description", d.spec.description},
               {"memory_bytes", d.spec.memory_bytes},
               {"bandwidth_bytes_per_s", d.device.bandwidth_bytes_per_s},
               {"peak_flops", optional_json(d.device.peak_flops)},
               {"source", d.spec.source},
               {"terms",
                {{"weights_bytes", rec.model.weight_bytes},
                 {"activation_bytes", d.terms.activation_bytes},
                 {"cublas_workspace_bytes", d.terms.cublas_workspace_bytes},
                 {"cuda_context_bytes", d.terms.cuda_context_bytes}}},
               {"single", point_json(d.plan.single)},
               {"plan", d.plan.chosen ? point_json(*d.plan.chosen) : json(nullptr)}};
    doc["devices"].push_back(dj);
  }
  return doc;
}

}  // namespace gpuledger::report
