// Kv report tables (see kv_tables.h).
#include "bench/report/kv_tables.h"

#include <fmt/format.h>

#include <string>

#include "bench/report/format.h"
#include "bench/report/plan_tables.h"
#include "bench/report/table.h"

namespace gpuledger::report {

using nlohmann::json;

namespace {

void print_capacity(std::ostream& os, const json& doc) {
  Table c("capacity: pool = utilization × device memory − weights − activation peak − overhead (vLLM)");
  c.columns({"rank", "pool", "sequences", "tokens", "decode batch", "roofline tokens/s"});
  for (const auto& rj : doc["ranks"]) {
    const auto& cap = rj["capacity"];
    std::string batch = "-", tps = "unknown (no bandwidth)";
    if (rj.contains("decode_roofline")) {
      batch = std::to_string(rj["decode_roofline"]["batch"].get<int64_t>());
      tps = fmt::format("{:.1f}", rj["decode_roofline"]["tokens_per_s"].get<double>());
    }
    c.row({fmt::format("r{}", rj["rank"].get<int64_t>()),
           cap["pool_bytes"].get<int64_t>() < 0 ? "does not fit" : format_bytes(cap["pool_bytes"].get<double>()),
           format_count(cap["sequences"].get<int64_t>()), format_count(cap["tokens"].get<int64_t>()), batch, tps});
  }
  os << "\n" << c.render();
}

// The two lines vLLM logs for this pool, computed as its current code does
// (analytic/kv_cache.h vllm_kv_log), beside the usable figures above.
void print_vllm(std::ostream& os, const json& doc) {
  const json& kv = doc["config"]["kv"];
  Table v(fmt::format(
      "vLLM's own figures: utilization {} × device memory − weights − profiled peak at {} tokens − "
      "non-torch {} − CUDA graphs {} (CUDA context outside)",
      kv["memory_utilization"].get<double>(), kv["prefill_chunk"].get<int64_t>(),
      format_bytes(kv["non_torch_bytes"].get<double>()), format_bytes(kv["cuda_graph_bytes"].get<double>())));
  v.columns({"rank", "available KV memory", "blocks (null incl.)", "vLLM log"});
  for (const auto& rj : doc["ranks"]) {
    if (!rj.contains("vllm")) continue;
    const auto& x = rj["vllm"];
    v.row({fmt::format("r{}", rj["rank"].get<int64_t>()), format_bytes(x["available_kv_bytes"].get<double>()),
           format_count(x["num_gpu_blocks"].get<int64_t>()),
           fmt::format("GPU KV cache size: {} tokens; Maximum concurrency for {} tokens per request: {:.2f}x",
                       format_count(x["kv_cache_size_tokens"].get<int64_t>()),
                       format_count(kv["max_model_len"].get<int64_t>()), x["max_concurrency"].get<double>())});
  }
  os << "\n" << v.render();
}

// The cache at the trace's mean and percentile lengths (bench/run/kv_run.h
// KvLengthBasis): what --requests of them reserve with the headroom, and how
// many fit when only pool / headroom is planned for.
void print_by_length(std::ostream& os, const json& doc) {
  const json& k = doc["config"]["kv"]["lengths"];
  const double h = k["headroom"].get<double>();
  Table t(fmt::format(
      "KV at the lengths of {} ({} requests, total = prompt + generated): mean and p{:g}; "
      "headroom ×{:g} (requests × {:g}; capacity in pool / {:g})",
      k["source"].get<std::string>(), k["requests"].get<int64_t>(), k["percentile"].get<double>(), h, h, h));
  t.columns({"rank", "basis", "tokens/sequence", "per sequence",
             fmt::format("{} requests × {:g}", doc["config"]["kv"]["requests"].get<int64_t>(), h),
             "sequences that fit"});
  for (const auto& rj : doc["ranks"])
    for (const auto& b : rj["by_length"])
      t.row({fmt::format("r{}", rj["rank"].get<int64_t>()), b["basis"].get<std::string>(),
             format_count(b["tokens"].get<int64_t>()), format_bytes(b["sequence_reserved_bytes"].get<double>()),
             format_bytes(b["requests_reserved_bytes"].get<double>()),
             b.contains("capacity") ? format_count(b["capacity"]["sequences"].get<int64_t>())
                                    : "unknown (no device memory)"});
  os << "\n" << t.render();
}

}  // namespace

void print_kv(std::ostream& os, const json& doc) {
  print_config_header(os, doc);
  const json& kv = doc["config"]["kv"];
  os << fmt::format("# kv      {} cache, {} (scales {}), block {}, max-model-len {}, context {}, requests {}\n\n",
                    kv["layout"].get<std::string>(), kv["dtype"].get<std::string>(), kv["scales"].get<std::string>(),
                    kv["block"].get<int64_t>(), kv["max_model_len"].get<int64_t>(), kv["context"].get<int64_t>(),
                    kv["requests"].get<int64_t>());
  if (kv.contains("budget")) {
    const std::string policy = kv["policy"].get<std::string>();
    const int64_t budget = kv["budget"].get<int64_t>();
    const std::string kept =
        policy == "sink"  ? fmt::format("the first {} and the most recent {}", kv["sink_tokens"].get<int64_t>(),
                                        budget - kv["sink_tokens"].get<int64_t>())
        : policy == "h2o" ? fmt::format("{} heavy hitters and the {} most recent", budget / 2, budget - budget / 2)
                          : "the most recent";
    os << fmt::format(
        "# policy  {}: each sequence keeps at most {} tokens per layer ({}); a sequence of {} keeps {}\n\n", policy,
        budget, kept, kv["context"].get<int64_t>(),
        doc["ranks"].empty() ? 0 : doc["ranks"][0]["per_sequence"]["tokens_kept"].get<int64_t>());
  }
  // Multi-head latent attention caches its latent, whole on every TP rank (analytic/mla.h).
  const bool mla = doc["config"]["model"].contains("kv_lora_rank");
  Table t(mla ? "KV cache per rank (MLA latent: layers · (kv_lora_rank + qk_rope_head_dim) · dtype bytes per token, "
                "whole on every TP rank)"
              : "KV cache per rank (2 · layers · kv_heads · head_dim · dtype bytes per token)");
  t.columns({"rank", "kv heads", "per token", "scales/token", "per sequence", "reserved (all requests)", "weights",
             "activation peak (est.)"});
  for (const auto& rj : doc["ranks"])
    t.row({fmt::format("r{} pp{}", rj["rank"].get<int64_t>(), rj["coords"]["pp"].get<int64_t>()),
           std::to_string(rj["kv_heads"].get<int64_t>()), format_bytes(rj["kv_bytes_per_token"].get<double>()),
           format_bytes(rj["kv_scale_bytes_per_token"].get<double>()),
           format_bytes(rj["per_sequence"]["reserved_bytes"].get<double>()),
           format_bytes(rj["analytic"]["exact"]["kv"].get<double>()),
           format_bytes(rj["analytic"]["exact"]["weights"].get<double>()),
           format_bytes(rj["analytic"]["exact"]["activations"].get<double>())});
  os << t.render();
  if (doc["summary"].contains("capacity_sequences")) print_capacity(os, doc);
  if (doc["summary"].contains("vllm")) print_vllm(os, doc);
  if (doc["config"]["kv"].contains("lengths")) print_by_length(os, doc);
}

}  // namespace gpuledger::report
