// Infer record → report JSON (see infer_json.h).
#include "bench/report/infer_json.h"

#include "analytic/params.h"
#include "bench/report/hardware_fma_json.h"
#include "bench/report/ledger_json.h"
#include "bench/report/mfu.h"
#include "bench/report/report.h"

namespace gpuledger::report {

using nlohmann::json;

namespace {

constexpr const char* kPagedWaste = "internal (block rounding)";

json infer_config_json(const run::InferRequest& q) {
  json c = config_json(q.config);
  c["infer"] = {
      {"kv", kv_layout_name(q.kv.layout)},
      {"kv_dtype", kv_format_name(q.kv.dtype)},
      {"kv_scales", kv_scales_name(q.kv.scales)},
      {"kv_policy", kv_policy_name(q.kv.eviction.policy)},
      {"kv_budget", q.kv.eviction.evicts() ? json(q.kv.eviction.budget) : json(nullptr)},
      {"kv_sink_tokens", q.kv.eviction.policy == KvPolicy::kSink ? json(q.kv.eviction.sink_tokens) : json(nullptr)},
      {"block", q.kv.block},
      {"max_model_len", q.kv.max_model_len},
      {"context", q.context},
      {"requests", static_cast<int64_t>(q.shapes.size())},
      {"prompt_len", q.prompt_len},
      {"gen_len", q.gen_len},
      {"trace", q.trace},
      {"max_batch", q.max_batch},
      {"prefill_chunk", q.prefill_chunk},
      {"max_num_batched_tokens", q.prefill_chunk},
      {"prefix_len", q.prefix_len},
      {"prefix_caching", q.prefix_caching},
      {"preemption", q.preemption},
      {"arrival_rate", optional_json(q.arrival_rate)},
      {"memory_utilization", q.memory_utilization},
      {"device_memory_bytes", *q.config.device_memory_bytes},
      {"overhead_bytes", q.overhead_bytes},
      {"kv_outliers", q.kv_outliers}};
  return c;
}

json kv_error_json(const std::optional<run::KvErrorRecord>& e) {
  if (!e) return nullptr;
  return {{"rms", e->rms},
          {"max", e->max},
          {"reference_rms", e->reference_rms},
          {"context", e->context},
          {"outlier_channels", e->outlier_channels},
          {"note", "K, V, Q drawn N(0,1); the first --kv-outliers key channels of every head ×50, the query 0 there"}};
}

json kv_policy_error_json(const std::optional<run::KvPolicyErrorRecord>& e) {
  if (!e) return nullptr;
  if (!e->computed) return {{"computed", false}, {"note", e->note}};
  return {{"computed", true},
          {"sequences", e->sequences},
          {"positions", e->positions},
          {"rms", e->rms},
          {"max", e->max},
          {"reference_rms", e->reference_rms},
          {"top1_agreement", e->top1_agreement},
          {"note", e->note}};
}

json percentiles_json(const LatencyPercentiles& p) {
  return {{"count", p.count}, {"mean", p.mean}, {"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}};
}

json latency_json(const run::InferServingRecord& v) {
  json j = {{"clock", v.clock}};
  if (!v.latency) {
    j["figures"] = nullptr;
    return j;
  }
  const LatencySummary& l = *v.latency;
  j["figures"] = {{"ttft_s", percentiles_json(l.ttft_s)}, {"tpot_s", percentiles_json(l.tpot_s)},
                  {"e2e_s", percentiles_json(l.e2e_s)},   {"completed", l.completed},
                  {"duration_s", l.duration_s},           {"request_throughput_per_s", l.request_throughput_per_s}};
  j["note"] =
      "from each request's arrival (queueing included): TTFT to the end of the step giving its first token, TPOT "
      "(finish − first token) / (generated − 1) over requests generating more than one, E2E to its last; "
      "percentiles interpolated linearly";
  return j;
}

json prefix_cache_json(const EngineStats& st) {
  return {{"hit_tokens", st.prefix_tokens_shared},
          {"hit_blocks", st.prefix_hit_blocks},
          {"query_tokens", st.prefix_query_tokens},
          {"hit_rate", st.prefix_query_tokens > 0
                           ? static_cast<double>(st.prefix_tokens_shared) / static_cast<double>(st.prefix_query_tokens)
                           : 0.0}};
}

json serving_summary_json(const run::InferServingRecord& v, const run::InferPeaks& peaks, json& checks) {
  const EngineStats& st = v.stats;
  json j;
  auto rate = [](double n, double sec) { return sec > 0 ? n / sec : 0.0; };
  const double dsec = st.decode_seconds;
  const double bytes_per_step = st.decode_steps > 0 ? static_cast<double>(st.decode_bytes_read) / st.decode_steps : 0.0;
  const double bps = rate(static_cast<double>(st.decode_bytes_read), dsec);
  j["prefill"] = {{"steps", st.prefill_steps},
                  {"tokens", st.prefill_tokens},
                  {"seconds", st.prefill_seconds},
                  {"tokens_per_s", rate(static_cast<double>(st.prefill_tokens), st.prefill_seconds)},
                  {"flops", st.prefill_flops}};
  j["decode"] = {{"steps", st.decode_steps},
                 {"tokens", st.decode_step_tokens},
                 {"seconds", dsec},
                 {"tokens_per_s", rate(static_cast<double>(st.decode_tokens), dsec)},
                 {"bytes_read", st.decode_bytes_read},
                 {"bytes_per_step", bytes_per_step},
                 {"bytes_per_s", bps},
                 {"bandwidth_utilization", peaks.bandwidth && dsec > 0 ? json(bps / *peaks.bandwidth) : json(nullptr)},
                 {"flops", st.decode_flops},
                 {"max_batch", st.max_decode_batch}};
  // MFU against the measured peak and (cpu) the hardware one: above 100 % an error (report/mfu.h)
  const double decode_rate = dsec > 0 ? static_cast<double>(st.decode_flops) / dsec : 0.0;
  put_mfu(j["decode"], "mfu", decode_rate, peaks.flops, "measured", checks, "decode.mfu (measured peak)");
  put_mfu(j["decode"], "mfu_hardware", decode_rate, peaks.hardware_flops, "hardware", checks,
          "decode.mfu (hardware peak)");
  j["mixed"] = {{"steps", st.mixed_steps},
                {"decode_tokens", st.decode_tokens - st.decode_step_tokens},
                {"note", "steps carrying decodes and prefill chunks together: counted as prefill steps"}};
  j["steps"] = st.steps;
  j["tokens_per_s"] = j["decode"]["tokens_per_s"];
  j["peak_bandwidth"] = optional_json(peaks.bandwidth);
  j["bandwidth_source"] = peaks.bandwidth_source;
  j["peak_flops"] = optional_json(peaks.flops);
  j["peak_source"] = peaks.flops_source;
  j["hardware_peak_flops"] = optional_json(peaks.hardware_flops);
  j["hardware_peak_source"] = peaks.hardware_source;
  if (peaks.hardware_cpu) j["hardware_peak_fma"] = hardware_fma_json(*peaks.hardware_cpu);
  j["mfu"] = j["decode"]["mfu"];
  if (v.moe) {
    const run::MoeDecodeRecord& mo = *v.moe;
    j["moe"] = {{"experts", mo.experts},
                {"top_k", mo.top_k},
                {"layers", mo.layers},
                {"decode_steps", mo.decode_steps},
                {"expert_weight_bytes", mo.expert_weight_bytes},
                {"experts_per_layer_step", mo.experts_per_layer_step},
                {"experts_per_layer_step_modeled", mo.experts_per_layer_step_modeled},
                {"weight_bytes_per_step", mo.weight_bytes_per_step},
                {"weight_bytes_per_step_modeled", mo.weight_bytes_per_step_modeled},
                {"routing_model", "uniform: E·(1 − (1 − k/E)^B) distinct experts per layer for B tokens"}};
  }
  j["mfu_hardware"] = j["decode"]["mfu_hardware"];
  j["preemptions"] = st.preemptions;
  j["prefix_tokens_shared"] = st.prefix_tokens_shared;
  j["prefix_cache"] = prefix_cache_json(st);
  j["swap"] = {{"swap_outs", st.swap_outs},
               {"swap_ins", st.swap_ins},
               {"bytes_to_host", st.swap_out_bytes},
               {"bytes_from_host", st.swap_in_bytes},
               {"host_peak_bytes", v.host_swap_peak_bytes},
               {"note",
                "--preemption swap: blocks × block bytes each way; host memory booked in the rank's ledger, "
                "account host (not device memory)"}};
  j["latency"] = latency_json(v);
  j["peak_running"] = st.peak_running;
  j["kv_bytes_per_token"] = v.kv_bytes_per_token;
  j["kv_scale_bytes_per_token"] = v.kv_scale_bytes_per_token;
  j["capacity_sequences"] = v.capacity_sequences;
  j["capacity_predicted"] = v.capacity_predicted;
  j["kv_error"] = kv_error_json(v.kv_error);
  j["kv_policy_error"] = kv_policy_error_json(v.kv_policy_error);
  j["evicted_tokens"] = v.evicted_tokens;
  j["note"] = v.computed ? ""
              : v.latency
                  ? "meta backend: nothing computed, the tokens are not meaningful; times are the modelled clock's"
                  : "meta backend: nothing computed, times and tokens are not meaningful";
  return j;
}

}  // namespace

json infer_rank_json(const run::InferRankRecord& r) {
  json j = {{"rank", r.rank}, {"coords", {{"dp", 0}, {"tp", r.rank}, {"pp", 0}}}};
  if (!r.served) return j;
  const int64_t assigned = r.kv_peak_assigned_bytes;
  json measured = {{"peak_bytes", r.peak_bytes},
                   {"peak_host_bytes", r.peak_by_account[Account::kHost]},
                   {"at_peak", account_bytes_json(r.at_peak)},
                   {"peak_by_account", account_bytes_json(r.peak_by_account)},
                   {"activation_peak_bytes", r.activation_peak_bytes},
                   {"pool_rule_bytes", r.pool_rule_bytes}};
  if (r.torch) measured["torch_caching_allocator"] = torch_replay_json(*r.torch);
  measured["kv"] = {{"pool_bytes", r.kv_booked_bytes},
                    {"peak_assigned_bytes", assigned},
                    {"peak_token_bytes", r.kv_peak_token_bytes}};
  measured["waste"] = {{"bytes", r.waste_bytes},
                       {"kind", r.paged ? kPagedWaste : "reservation (max-model-len − length)"},
                       {"token_fraction", assigned > 0 ? static_cast<double>(r.kv_peak_token_bytes) / assigned : 0.0},
                       {"note",
                        "assigned and token peaks may fall on different steps; the null block and fixed "
                        "scales are left out of the waste"}};
  j["measured"] = measured;
  j["capacity"] = {{"context", r.context},
                   {"measured", r.capacity_measured},
                   {"predicted", r.predicted.sequences},
                   {"pool_bytes", r.pool_rule_bytes},
                   {"assigned_bytes_full", r.assigned_bytes_full}};
  j["analytic"] = {
      {"exact",
       {{"weights", r.analytic_weights_bytes},
        {"kv_full", r.analytic_kv_full_bytes},
        {"activation_peak", r.analytic_activation_bytes}}},
      {"capacity",
       {{"pool_bytes", r.predicted.pool_bytes}, {"sequences", r.predicted.sequences}, {"tokens", r.predicted.tokens}}},
      {"kv_bytes_per_token", r.analytic_kv_bytes_per_token}};
  j["flops"] = {{"executed", r.executed_flops}};
  return j;
}

run::InferRankRecord infer_rank_from_json(const json& j) {
  run::InferRankRecord r;
  r.rank = j.at("rank").get<int64_t>();
  r.served = j.contains("measured");
  if (!r.served) return r;
  const json& m = j.at("measured");
  r.peak_bytes = m.at("peak_bytes").get<int64_t>();
  r.at_peak = account_bytes_from_json(m.at("at_peak"));
  r.peak_by_account = account_bytes_from_json(m.at("peak_by_account"));
  r.activation_peak_bytes = m.at("activation_peak_bytes").get<int64_t>();
  r.pool_rule_bytes = m.at("pool_rule_bytes").get<int64_t>();
  if (m.contains("torch_caching_allocator")) r.torch = torch_replay_from_json(m["torch_caching_allocator"]);
  r.kv_booked_bytes = m.at("kv").at("pool_bytes").get<int64_t>();
  r.kv_peak_assigned_bytes = m.at("kv").at("peak_assigned_bytes").get<int64_t>();
  r.kv_peak_token_bytes = m.at("kv").at("peak_token_bytes").get<int64_t>();
  r.waste_bytes = m.at("waste").at("bytes").get<int64_t>();
  r.paged = m.at("waste").at("kind") == kPagedWaste;
  const json& cap = j.at("capacity");
  r.context = cap.at("context").get<int64_t>();
  r.capacity_measured = cap.at("measured").get<int64_t>();
  r.assigned_bytes_full = cap.at("assigned_bytes_full").get<int64_t>();
  const json& a = j.at("analytic");
  r.predicted = {a.at("capacity").at("pool_bytes").get<int64_t>(), a.at("capacity").at("sequences").get<int64_t>(),
                 a.at("capacity").at("tokens").get<int64_t>()};
  r.analytic_weights_bytes = a.at("exact").at("weights").get<int64_t>();
  r.analytic_kv_full_bytes = a.at("exact").at("kv_full").get<int64_t>();
  // absent from reports written before it was recorded
  r.analytic_activation_bytes = a.at("exact").value("activation_peak", int64_t{0});
  r.analytic_kv_bytes_per_token = a.at("kv_bytes_per_token").get<int64_t>();
  r.executed_flops = j.at("flops").at("executed").get<int64_t>();
  return r;
}

json infer_report_json(const run::InferRecord& rec) {
  const auto& q = rec.request;
  json doc = make_report("infer");
  doc["env"]["backend"] = q.backend;
  doc["env"]["world"] = q.config.layout.world();
  doc["env"]["device"] = rec.device_description;
  doc["config"] = infer_config_json(q);
  doc["params"] = {{"total", analytic::model_params(q.config.model)}};
  if (!rec.ranks.empty()) {
    doc["ranks"] = json::array();
    for (const auto& r : rec.ranks) doc["ranks"].push_back(infer_rank_json(r));
  }
  doc["checks"] = rec.checks;
  if (rec.serving) doc["summary"] = serving_summary_json(*rec.serving, rec.peaks, doc["checks"]);
  if (rec.status != "ok") {
    doc["status"] = rec.status;
    doc["error"] = rec.error;
  }
  return doc;
}

}  // namespace gpuledger::report
