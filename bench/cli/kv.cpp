// `gpuledger kv`: the analytic KV cache — bytes per token per rank, the
// reservation for N sequences (contiguous or paged), capacity under vLLM's
// memory rule, and the decode roofline. Formulas: docs/formulas/kv.md.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <ostream>

#include "bench/cli/commands.h"
#include "bench/cli/plan_report.h"
#include "bench/report/format.h"
#include "bench/report/report.h"
#include "bench/report/table.h"
#include "analytic/activations.h"
#include "analytic/kv_cache.h"
#include "analytic/params.h"

namespace gpuledger::cli {

using nlohmann::json;
using report::format_bytes;
using report::format_count;

namespace {

// The transient activation peak of one inference forward over `tokens` tokens
// (what vLLM's profiling run measures before sizing the pool): one layer's
// tensors without recompute or dropout at s = tokens, b = 1, plus the fp32
// logits of those tokens. An estimate; `gpuledger infer` measures it.
int64_t inference_activation_bytes(const Resolved& r, int64_t tokens) {
  RunConfig run = r.run;
  run.seq = tokens;
  run.mbs = 1;
  run.dropout = 0;
  run.recompute = Recompute::kNone;
  return analytic::activation_bytes_per_layer(r.model, r.layout, run) +
         4 * tokens * analytic::padded_vocab(r.model, r.layout.tp) / r.layout.tp;
}

int run_kv(const Options& o, int64_t prefill_chunk) {
  const Resolved r = resolve(o);
  const auto& m = r.model;
  const auto& l = r.layout;
  const analytic::KvOptions kv = resolve_kv(o, m);
  const int64_t context = o.context > 0 ? o.context : r.run.seq;
  if (kv.layout == KvLayout::kContiguous && context > kv.max_model_len)
    throw LayoutError(fmt::format("--context {} exceeds --max-model-len {}: a contiguous cache reserves "
                                  "max-model-len tokens per sequence", context, kv.max_model_len));
  const auto ranks = select_ranks(o.ranks, l, l.world());

  json doc = report::make_report("kv");
  doc["env"]["backend"] = "analytic";
  doc["env"]["world"] = l.world();
  doc["env"]["device"] = r.device ? r.device->name : (r.device_memory_bytes ? "custom" : "none");
  doc["config"] = report::config_json(r);
  doc["config"]["kv"] = {{"layout", kv_layout_name(kv.layout)},
                         {"dtype", kv_format_name(kv.dtype)},
                         {"scales", kv_scales_name(kv.scales)},
                         {"block", kv.block},
                         {"max_model_len", kv.max_model_len},
                         {"context", context},
                         {"requests", o.requests},
                         {"memory_utilization", o.memory_utilization},
                         {"prefill_chunk", prefill_chunk}};
  doc["params"] = {{"total", analytic::model_params(m)}, {"padded_vocab", analytic::padded_vocab(m, l.tp)}};

  const int64_t overhead = parse_size(o.overhead);
  std::optional<double> bandwidth;
  if (r.device && r.device->bandwidth_bytes_per_s) bandwidth = *r.device->bandwidth_bytes_per_s;
  doc["ranks"] = json::array();
  json first_summary;
  for (int64_t rank : ranks) {
    const Coords c = l.coords(rank);
    // A rank's view of the model: its stage's layers (kv_bytes_per_token takes the layout).
    const int64_t per_token = analytic::kv_bytes_per_token(m, l, kv.dtype);
    const int64_t scale_per_token = analytic::kv_scale_bytes_per_token(m, l, kv);
    const int64_t reserved = analytic::kv_reserved_bytes(m, l, kv, o.requests, context);
    const int64_t weights = analytic::rank_params(m, l, rank) * dtype_bytes(r.run.dtype);
    const int64_t acts = inference_activation_bytes(r, std::min(context, prefill_chunk));
    json rj = {{"rank", rank},
               {"coords", {{"dp", c.dp}, {"tp", c.tp}, {"pp", c.pp}}},
               {"kv_heads", kv_heads_on_rank(m.kv_heads, l.tp)},
               {"kv_bytes_per_token", per_token},
               {"kv_scale_bytes_per_token", scale_per_token},
               {"analytic", {{"exact", {{"weights", weights}, {"activations", acts}, {"kv", reserved},
                                        {"total", weights + acts + reserved}}}}}};
    const int64_t kept = analytic::kv_tokens_kept(m, context);
    const int64_t per_seq_reserved = analytic::kv_reserved_bytes(m, l, kv, 1, context) -
                                     (kv.layout == KvLayout::kPaged ? analytic::kv_block_bytes(m, l, kv) : 0);
    rj["per_sequence"] = {{"tokens_kept", kept}, {"reserved_bytes", per_seq_reserved},
                          {"token_bytes", kept * (per_token + scale_per_token)}};
    if (r.device_memory_bytes) {
      const auto cap = analytic::kv_capacity(m, l, kv, *r.device_memory_bytes, o.memory_utilization, weights,
                                             acts, overhead, context);
      rj["capacity"] = {{"pool_bytes", cap.pool_bytes}, {"sequences", cap.sequences}, {"tokens", cap.tokens}};
      const int64_t batch = o.batch > 0 ? o.batch : std::max<int64_t>(cap.sequences, 1);
      if (bandwidth) {
        const auto roof = analytic::decode_roofline(weights, kept * (per_token + scale_per_token), batch, *bandwidth);
        rj["decode_roofline"] = {{"batch", batch}, {"bytes_per_step", roof.bytes_per_step},
                                 {"step_seconds", roof.step_seconds}, {"tokens_per_s", roof.tokens_per_s},
                                 {"bandwidth_bytes_per_s", *bandwidth}};
      }
    }
    doc["ranks"].push_back(rj);
    if (first_summary.is_null()) first_summary = rj;
  }
  json s;
  s["kv_bytes_per_token"] = first_summary["kv_bytes_per_token"];
  s["kv_scale_bytes_per_token"] = first_summary["kv_scale_bytes_per_token"];
  s["kv_reserved_bytes"] = first_summary["analytic"]["exact"]["kv"];
  if (first_summary.contains("capacity")) {
    s["capacity_sequences"] = first_summary["capacity"]["sequences"];
    s["capacity_tokens"] = first_summary["capacity"]["tokens"];
    s["pool_bytes"] = first_summary["capacity"]["pool_bytes"];
  }
  if (first_summary.contains("decode_roofline")) s["decode_roofline"] = first_summary["decode_roofline"];
  s["bandwidth_source"] = r.device ? r.device->source : "no --device: bandwidth unknown";
  doc["summary"] = s;

  if (!o.json_path.empty()) report::write_report(doc, o.json_path);
  if (o.quiet) return 0;
  std::ostream& os = table_stream(o);
  print_config_header(os, doc);
  os << fmt::format("# kv      {} cache, {} (scales {}), block {}, max-model-len {}, context {}, requests {}\n\n",
                    o.kv_layout, o.kv_dtype, o.kv_scales, kv.block, kv.max_model_len, context, o.requests);
  report::Table t("KV cache per rank (2 · layers · kv_heads · head_dim · dtype bytes per token)");
  t.columns({"rank", "kv heads", "per token", "scales/token", "per sequence", "reserved (all requests)",
             "weights", "activation peak (est.)"});
  for (const auto& rj : doc["ranks"])
    t.row({fmt::format("r{} pp{}", rj["rank"].get<int64_t>(), rj["coords"]["pp"].get<int64_t>()),
           std::to_string(rj["kv_heads"].get<int64_t>()), format_bytes(rj["kv_bytes_per_token"].get<double>()),
           format_bytes(rj["kv_scale_bytes_per_token"].get<double>()),
           format_bytes(rj["per_sequence"]["reserved_bytes"].get<double>()),
           format_bytes(rj["analytic"]["exact"]["kv"].get<double>()),
           format_bytes(rj["analytic"]["exact"]["weights"].get<double>()),
           format_bytes(rj["analytic"]["exact"]["activations"].get<double>())});
  os << t.render();
  if (s.contains("capacity_sequences")) {
    report::Table c("capacity: pool = utilization × device memory − weights − activation peak − overhead (vLLM)");
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
  return 0;
}

}  // namespace

void add_kv_command(CLI::App& root, std::vector<Command>& out) {
  auto opts = std::make_shared<Options>();  // CLI11 binds to it; the run closure keeps it alive
  auto chunk = std::make_shared<int64_t>(2048);
  auto* app = root.add_subcommand("kv", "analytic KV-cache bytes, capacity (concurrent sequences) and decode roofline");
  add_model_options(*app, *opts);
  add_layout_options(*app, *opts);
  add_run_options(*app, *opts);
  add_device_options(*app, *opts);
  add_kv_options(*app, *opts);
  app->add_option("--prefill-chunk", *chunk,
                  "tokens per prefill forward: sizes the activation peak (vLLM max_num_batched_tokens)")
      ->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{1} << 30))->group("KV cache");
  add_output_options(*app, *opts);
  out.push_back({app, [opts, chunk]() { return run_kv(*opts, *chunk); }});
}

}  // namespace gpuledger::cli
