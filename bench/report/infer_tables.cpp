// `gpuledger infer` tables (see infer_tables.h).
#include "bench/report/infer_tables.h"

#include <fmt/format.h>

#include "bench/report/format.h"
#include "bench/report/plan_tables.h"
#include "bench/report/table.h"
#include "bench/report/train_tables.h"

namespace gpuledger::report {

using nlohmann::json;

namespace {
std::string bytes(const json& v) { return v.is_number() ? format_bytes(v.get<double>()) : "-"; }
std::string pct(const json& v) { return v.is_number() ? format_percent(v.get<double>()) : "unknown"; }

// An MFU, or the error that replaced it (above 100 % of its peak).
std::string mfu_text(const json& phase, const std::string& key) {
  if (phase.contains(key + "_error")) return "ERROR: " + phase[key + "_error"].get<std::string>();
  return pct(phase.value(key, json()));
}
void print_latency(std::ostream& os, const json& lat) {
  if (!lat["figures"].is_object()) {
    os << "\n# latency: " << lat["clock"].get<std::string>() << "\n";
    return;
  }
  const json& f = lat["figures"];
  Table t("latency per request (ms, engine clock, queueing included)");
  t.columns({"figure", "requests", "mean", "P50", "P90", "P99"});
  const auto row = [&](const char* name, const json& p) {
    const auto ms = [&](const char* k) { return fmt::format("{:.3f}", 1e3 * p[k].get<double>()); };
    t.row({name, format_count(p["count"].get<int64_t>()), ms("mean"), ms("p50"), ms("p90"), ms("p99")});
  };
  row("TTFT", f["ttft_s"]);
  row("TPOT (mean ITL)", f["tpot_s"]);
  row("end-to-end", f["e2e_s"]);
  t.note(fmt::format("{} requests in {:.3f} s: {:.2f} requests/s", f["completed"].get<int64_t>(),
                     f["duration_s"].get<double>(), f["request_throughput_per_s"].get<double>()));
  t.note("clock: " + lat["clock"].get<std::string>());
  os << "\n" << t.render();
}

// The KV dtype's attention error against bf16, and the KV budget's output error against a full cache.
void print_kv_errors(std::ostream& os, const json& c, const json& s) {
  if (s.contains("kv_error") && s["kv_error"].is_object()) {
    const json& e = s["kv_error"];
    os << fmt::format(
        "\n# KV {} ({} scales) vs a bf16 cache, attention output of one decode step over {} tokens, "
        "{} outlier key channels ×50: RMS error {:.3g}, max {:.3g} (output RMS {:.3g})\n",
        c["kv_dtype"].get<std::string>(), c["kv_scales"].get<std::string>(), e["context"].get<int64_t>(),
        e["outlier_channels"].get<int64_t>(), e["rms"].get<double>(), e["max"].get<double>(),
        e["reference_rms"].get<double>());
  }
  if (s.contains("kv_policy_error") && s["kv_policy_error"].is_object()) {
    const json& e = s["kv_policy_error"];
    const std::string policy = c["kv_policy"].get<std::string>();
    if (e.value("computed", false))
      os << fmt::format(
          "\n# KV policy {} (budget {} tokens; {} tokens evicted) vs a full cache, next-token logits at {} "
          "positions past the budget over {} sequences: RMS error {:.3g}, max {:.3g} (logit RMS {:.3g}); greedy "
          "token agrees at {:.1f}%\n",
          policy, c["kv_budget"].get<int64_t>(), s.value("evicted_tokens", int64_t{0}), e["positions"].get<int64_t>(),
          e["sequences"].get<int64_t>(), e["rms"].get<double>(), e["max"].get<double>(),
          e["reference_rms"].get<double>(), 100.0 * e["top1_agreement"].get<double>());
    else
      os << fmt::format("\n# KV policy {} (budget {} tokens): output error {}\n", policy, c["kv_budget"].get<int64_t>(),
                        e.value("note", std::string()));
  }
}

// A MoE model's decode: the distinct experts routed to and the weights read,
// measured and under uniform routing (analytic/inference.h). On meta the
// router reads zeros and every token ties to experts 0 … k − 1.
std::string moe_decode_note(const json& mo) {
  return fmt::format(
      "MoE decode ({} experts, top-{}, {} layers, no capacity drop): {:.2f} distinct experts per layer per step "
      "(uniform routing model {:.2f}); weights read per step {} (model {})",
      mo["experts"].get<int64_t>(), mo["top_k"].get<int64_t>(), mo["layers"].get<int64_t>(),
      mo["experts_per_layer_step"].get<double>(), mo["experts_per_layer_step_modeled"].get<double>(),
      bytes(mo["weight_bytes_per_step"]), bytes(mo["weight_bytes_per_step_modeled"]));
}

}  // namespace

void print_infer_summary(std::ostream& os, const json& doc) {
  print_config_header(os, doc);
  const json& c = doc["config"]["infer"];
  os << fmt::format(
      "# infer   {} cache, {} (scales {}), block {}, max-model-len {}, {} requests, max-batch {}, "
      "max-num-batched-tokens {}, prefix {}\n",
      c["kv"].get<std::string>(), c["kv_dtype"].get<std::string>(), c["kv_scales"].get<std::string>(),
      c["block"].get<int64_t>(), c["max_model_len"].get<int64_t>(), c["requests"].get<int64_t>(),
      c["max_batch"].get<int64_t>(), c["prefill_chunk"].get<int64_t>(), c["prefix_len"].get<int64_t>());
  if (doc["status"] != "ok") {
    os << "\n# FAILED (" << doc["status"].get<std::string>() << "): " << doc.value("error", "") << "\n";
    if (doc.contains("checks")) print_checks(os, doc["checks"]);
    return;
  }
  const json& rk = doc["ranks"][0];
  const json& m = rk["measured"];
  const json& kv = m["kv"];
  Table t("memory (rank 0)");
  t.columns({"what", "bytes", "note"});
  t.row({"weights", bytes(m["peak_by_account"]["weights"]), "no gradients (serving)"});
  t.row({"activation peak (profiled)", bytes(m["activation_peak_bytes"]),
         fmt::format("workspace peak of one {}-token prefill, attention {}", c["prefill_chunk"].get<int64_t>(),
                     doc["config"]["run"]["attention"].get<std::string>())});
  t.row({"activation peak (analytic)", bytes(rk["analytic"]["exact"]["activation_peak"]),
         "analytic/inference.h, the figure `kv` uses"});
  t.row(
      {"KV pool (vLLM rule)", bytes(m["pool_rule_bytes"]), "utilization × memory − weights − activations − overhead"});
  t.row({"KV booked by the ledger", bytes(kv["pool_bytes"]),
         c["kv"] == "paged" ? "the pool, up front" : "reservations at their peak"});
  t.row({"KV assigned at peak", bytes(kv["peak_assigned_bytes"]), "blocks handed out (+ null block) / reservations"});
  t.row({"KV tokens at peak", bytes(kv["peak_token_bytes"]), "bytes of tokens actually stored"});
  t.row({"host memory at peak (swap)", bytes(m["peak_by_account"]["host"]),
         "preempted sequences' blocks in host memory (account host; not device memory)"});
  t.row(
      {"waste at peak", bytes(m["waste"]["bytes"]),
       m["waste"]["kind"].get<std::string>() + ", tokens hold " + pct(m["waste"]["token_fraction"]) + " of assigned"});
  if (m.contains("torch_caching_allocator")) {
    const json& tc = m["torch_caching_allocator"];
    t.row({"allocated as PyTorch (peak)", bytes(tc["peak_allocated_bytes"]),
           "max_memory_allocated: 512 B rounding, unsplit blocks (whole run)"});
    t.row({"reserved as PyTorch (peak)", bytes(tc["peak_reserved_bytes"]),
           fmt::format("max_memory_reserved: {} cached segments, cuBLAS workspace {} incl.; CUDA context on top",
                       tc["segments"].get<int64_t>(), bytes(tc["cublas_workspace_bytes"]))});
  }
  os << "\n" << t.render();

  const json& cap = rk["capacity"];
  Table ct(fmt::format("capacity: concurrent sequences of {} tokens", cap["context"].get<int64_t>()));
  ct.columns({"measured (filling the pool)", "predicted (gpuledger kv rule)", "pool"});
  ct.row({format_count(cap["measured"].get<int64_t>()), format_count(cap["predicted"].get<int64_t>()),
          bytes(cap["pool_bytes"])});
  os << "\n" << ct.render();

  const json& s = doc["summary"];
  Table tp("throughput");
  tp.columns({"phase", "steps", "tokens", "seconds", "tokens/s"});
  tp.row({"prefill", format_count(s["prefill"]["steps"].get<int64_t>()),
          format_count(s["prefill"]["tokens"].get<int64_t>()),
          fmt::format("{:.3f}", s["prefill"]["seconds"].get<double>()),
          fmt::format("{:.1f}", s["prefill"]["tokens_per_s"].get<double>())});
  tp.row({"decode", format_count(s["decode"]["steps"].get<int64_t>()),
          format_count(s["decode"]["tokens"].get<int64_t>()),
          fmt::format("{:.3f}", s["decode"]["seconds"].get<double>()),
          fmt::format("{:.1f}", s["decode"]["tokens_per_s"].get<double>())});
  tp.note(fmt::format(
      "decode: {} read per step on average (weights once, the embedding rows looked up, the K/V held); {}/s "
      "achieved, {} of {} ({})",
      bytes(s["decode"]["bytes_per_step"]), bytes(s["decode"]["bytes_per_s"]),
      pct(s["decode"]["bandwidth_utilization"]),
      s["peak_bandwidth"].is_number() ? bytes(s["peak_bandwidth"]) + "/s" : "unknown",
      s["bandwidth_source"].get<std::string>()));
  tp.note(fmt::format("decode MFU {} of the measured peak ({}){}", mfu_text(s["decode"], "mfu"),
                      s["peak_source"].get<std::string>(),
                      s.value("hardware_peak_source", "").empty()
                          ? std::string()
                          : fmt::format("; {} of the hardware peak ({})", mfu_text(s["decode"], "mfu_hardware"),
                                        s["hardware_peak_source"].get<std::string>())));
  if (s.contains("moe")) tp.note(moe_decode_note(s["moe"]));
  tp.note(fmt::format("mixed steps (decodes beside prefill chunks, in the prefill row): {} carrying {} decode tokens",
                      s["mixed"]["steps"].get<int64_t>(), s["mixed"]["decode_tokens"].get<int64_t>()));
  const json& pc = s["prefix_cache"];
  const json& sw = s["swap"];
  tp.note(fmt::format("preemptions ({}): {}; swapped out {}, in {}: {} to host, {} back, host peak {}",
                      c["preemption"].get<std::string>(), s["preemptions"].get<int64_t>(),
                      sw["swap_outs"].get<int64_t>(), sw["swap_ins"].get<int64_t>(), bytes(sw["bytes_to_host"]),
                      bytes(sw["bytes_from_host"]), bytes(sw["host_peak_bytes"])));
  tp.note(fmt::format("prefix cache: {} hit tokens in {} blocks of {} looked up ({}); peak running: {}",
                      format_count(pc["hit_tokens"].get<int64_t>()), format_count(pc["hit_blocks"].get<int64_t>()),
                      format_count(pc["query_tokens"].get<int64_t>()), pct(pc["hit_rate"]),
                      s["peak_running"].get<int64_t>()));
  if (!s.value("note", "").empty()) tp.note(s["note"].get<std::string>());
  os << "\n" << tp.render();
  print_latency(os, s["latency"]);
  print_kv_errors(os, c, s);
  print_checks(os, doc["checks"]);
}

}  // namespace gpuledger::report
