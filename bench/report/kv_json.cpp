// Kv record → report JSON (see kv_json.h).
#include "bench/report/kv_json.h"

#include "bench/report/report.h"

namespace gpuledger::report {

using nlohmann::json;

namespace {

json kv_rank_json(const run::KvRankRecord& r) {
  json j = {{"rank", r.rank},
            {"coords", {{"dp", r.coords.dp}, {"tp", r.coords.tp}, {"pp", r.coords.pp}}},
            {"kv_heads", r.kv_heads},
            {"kv_bytes_per_token", r.kv_bytes_per_token},
            {"kv_scale_bytes_per_token", r.kv_scale_bytes_per_token},
            {"analytic",
             {{"exact",
               {{"weights", r.weight_bytes},
                {"activations", r.activation_bytes},
                {"kv", r.reserved_bytes},
                {"total", r.weight_bytes + r.activation_bytes + r.reserved_bytes}}}}}};
  j["per_sequence"] = {{"tokens_kept", r.tokens_kept},
                       {"reserved_bytes", r.sequence_reserved_bytes},
                       {"token_bytes", r.sequence_token_bytes}};
  if (r.capacity)
    j["capacity"] = {
        {"pool_bytes", r.capacity->pool_bytes}, {"sequences", r.capacity->sequences}, {"tokens", r.capacity->tokens}};
  if (const auto& v = r.vllm)
    j["vllm"] = {{"requested_bytes", v->requested_bytes},
                 {"available_kv_bytes", v->available_bytes},
                 {"num_gpu_blocks", v->num_blocks},
                 {"kv_cache_size_tokens", v->tokens},
                 {"max_concurrency", v->max_concurrency}};
  if (!r.by_length.empty()) {
    j["by_length"] = json::array();
    for (const auto& b : r.by_length) {
      json bj = {{"basis", b.basis},
                 {"tokens", b.tokens},
                 {"sequence_reserved_bytes", b.sequence_reserved_bytes},
                 {"requests_reserved_bytes", b.requests_reserved_bytes}};
      if (b.capacity)
        bj["capacity"] = {{"pool_bytes", b.capacity->pool_bytes},
                          {"sequences", b.capacity->sequences},
                          {"tokens", b.capacity->tokens}};
      j["by_length"].push_back(bj);
    }
  }
  if (const auto& d = r.decode_roofline)
    j["decode_roofline"] = {{"batch", d->batch},
                            {"bytes_per_step", d->roofline.bytes_per_step},
                            {"step_seconds", d->roofline.step_seconds},
                            {"tokens_per_s", d->roofline.tokens_per_s},
                            {"bandwidth_bytes_per_s", d->bandwidth_bytes_per_s}};
  return j;
}

// The headline figures: the first reported rank's.
json kv_summary_json(const run::KvRecord& record, const json& first) {
  json s;
  s["kv_bytes_per_token"] = first["kv_bytes_per_token"];
  s["kv_scale_bytes_per_token"] = first["kv_scale_bytes_per_token"];
  // Bytes per stored K or V element, scales included (int4 with fp16 scale and
  // zero per G channels: 1/2 + 4/G): the figure int4 caches are compared by.
  const auto& c = record.request.config;
  if (record.request.kv.scales == KvScales::kPerGroup && first.contains("kv_heads")) {
    const int64_t elements =
        2 * layers_on_stage(c.model, c.layout, 0) * first["kv_heads"].get<int64_t>() * c.model.head_dim;
    s["kv_bytes_per_element"] = static_cast<double>(first["kv_bytes_per_token"].get<int64_t>() +
                                                    first["kv_scale_bytes_per_token"].get<int64_t>()) /
                                static_cast<double>(elements);
  }
  s["kv_reserved_bytes"] = first["analytic"]["exact"]["kv"];
  if (first.contains("capacity")) {
    s["capacity_sequences"] = first["capacity"]["sequences"];
    s["capacity_tokens"] = first["capacity"]["tokens"];
    s["pool_bytes"] = first["capacity"]["pool_bytes"];
  }
  if (first.contains("vllm")) s["vllm"] = first["vllm"];
  if (first.contains("decode_roofline")) s["decode_roofline"] = first["decode_roofline"];
  if (first.contains("by_length")) s["by_length"] = first["by_length"];
  const auto& device = record.request.config.device;
  s["bandwidth_source"] = device ? device->source : "no --device: bandwidth unknown";
  return s;
}

}  // namespace

json kv_report_json(const run::KvRecord& record) {
  const auto& q = record.request;
  const auto& c = q.config;
  json doc = make_report("kv");
  doc["env"]["backend"] = "analytic";
  doc["env"]["world"] = c.layout.world();
  doc["env"]["device"] = c.device_label();
  doc["config"] = config_json(c);
  doc["config"]["kv"] = {{"layout", kv_layout_name(q.kv.layout)},
                         {"dtype", kv_format_name(q.kv.dtype)},
                         {"scales", kv_scales_name(q.kv.scales)},
                         {"block", q.kv.block},
                         {"max_model_len", q.kv.max_model_len},
                         {"context", q.context},
                         {"requests", q.requests},
                         {"memory_utilization", q.memory_utilization},
                         {"prefill_chunk", run::effective_prefill_chunk(q)},
                         {"prefill_chunk_source", q.prefill_chunk > 0 ? "--prefill-chunk"
                                                  : c.device          ? "vLLM max_num_batched_tokens default for the "
                                                                        "device (vllm serve)"
                                                                      : "no --device: 2048"},
                         {"non_torch_bytes", q.non_torch_bytes},
                         {"cuda_graph_bytes", q.cuda_graph_bytes}};
  if (const auto& k = q.lengths)
    doc["config"]["kv"]["lengths"] = {{"source", k->source},
                                      {"requests", k->totals.size()},
                                      {"percentile", k->percentile},
                                      {"headroom", k->headroom}};
  if (q.kv.scales == KvScales::kPerGroup) doc["config"]["kv"]["group_size"] = q.kv.group;
  doc["config"]["kv"]["policy"] = kv_policy_name(q.kv.eviction.policy);
  if (q.kv.eviction.evicts()) doc["config"]["kv"]["budget"] = q.kv.eviction.budget;
  if (q.kv.eviction.policy == KvPolicy::kSink) doc["config"]["kv"]["sink_tokens"] = q.kv.eviction.sink_tokens;
  doc["params"] = {{"total", record.params}, {"padded_vocab", record.padded_vocab}};
  doc["ranks"] = json::array();
  for (const auto& r : record.ranks) doc["ranks"].push_back(kv_rank_json(r));
  doc["summary"] = kv_summary_json(record, doc["ranks"].empty() ? json() : doc["ranks"][0]);
  return doc;
}

}  // namespace gpuledger::report
