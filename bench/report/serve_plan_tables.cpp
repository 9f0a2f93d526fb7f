// Serve-plan tables (see serve_plan_tables.h).
#include "bench/report/serve_plan_tables.h"

#include <fmt/format.h>

#include <string>

#include "bench/report/format.h"
#include "bench/report/table.h"

namespace gpuledger::report {

using nlohmann::json;

namespace {

std::string why_not(const json& p) {
  if (!p["stable"].get<bool>()) return "no: decode cannot keep up (λ·n·b >= 1)";
  if (p["need_bytes"].get<int64_t>() > p["usable_bytes"].get<int64_t>()) return "no: memory";
  if (!p["meets_ttft"].get<bool>()) return "no: TTFT target";
  if (!p["meets_tpot"].get<bool>()) return "no: TPOT target";
  return "yes";
}

std::string step(const json& p) { return p["stable"].get<bool>() ? format_seconds(p["tpot_s"].get<double>()) : "-"; }

}  // namespace

void print_serve_plan(std::ostream& os, const json& doc) {
  const json& s = doc["config"]["serving"];
  const json& m = doc["model"];
  os << fmt::format("# serve-plan {} ({}): {} parameters, weights {}, KV {} per token\n",
                    doc["config"]["model"]["name"].get<std::string>(), doc["config"]["run"]["dtype"].get<std::string>(),
                    format_count(m["params"].get<int64_t>()), format_bytes(m["weight_bytes"].get<double>()),
                    format_bytes(m["kv_bytes_per_token"].get<double>()));
  os << fmt::format(
      "# demand  {:g} requests/s, {:g} prompt + {:g} output tokens; KV sized at {} tokens ({}), "
      "headroom ×{:g}\n",
      s["qps"].get<double>(), s["prompt_tokens"].get<double>(), s["output_tokens"].get<double>(),
      s["kv_sizing_tokens"].get<int64_t>(), s["kv_sizing_basis"].get<std::string>(), s["headroom"].get<double>());
  os << fmt::format("# assumed MBU {:g} (decode), MFU {:g} (prefill), gpu_memory_utilization {:g}, CUDA context {}",
                    s["mbu"].get<double>(), s["mfu"].get<double>(), s["memory_utilization"].get<double>(),
                    format_bytes(s["cuda_context_bytes"].get<double>()));
  if (!s["ttft_ms"].is_null()) os << fmt::format("; target TTFT {:g} ms", s["ttft_ms"].get<double>());
  if (!s["tpot_ms"].is_null()) os << fmt::format("; target TPOT {:g} ms", s["tpot_ms"].get<double>());
  os << "\n\n";
  Table one(
      "one device: L = λ·W (Little's law), TPOT = max(a + b·L, c·L) (roofline), "
      "need = weights + KV(⌈L·headroom⌉ sequences) + activations + cuBLAS workspace");
  one.columns({"device", "memory", "bandwidth", "prefill", "TPOT", "concurrency L", "KV", "need", "usable", "serves?"});
  Table plan("fewest devices: t-way tensor parallel × r replicas, each replica at λ/r");
  plan.columns(
      {"device", "t", "replicas", "devices", "TPOT", "L per replica", "KV per device", "need per device", "usable"});
  for (const auto& d : doc["devices"]) {
    const json& p = d["single"];
    const std::string name = d["name"].get<std::string>();
    one.row({name, format_bytes(d["memory_bytes"].get<double>()),
             format_si(d["bandwidth_bytes_per_s"].get<double>(), "B/s"),
             d["peak_flops"].is_null() ? "unknown (no peak)" : format_seconds(p["prefill_s"].get<double>()), step(p),
             p["stable"].get<bool>() ? fmt::format("{:.2f}", p["concurrency"].get<double>()) : "unbounded",
             format_bytes(p["kv_bytes"].get<double>()), format_bytes(p["need_bytes"].get<double>()),
             format_bytes(p["usable_bytes"].get<double>()), why_not(p)});
    const json& c = d["plan"];
    if (c.is_null()) {
      plan.row({name, "-", "-", "none within t <= 8, r <= 4096", "-", "-", "-", "-", "-"});
      continue;
    }
    plan.row({name, std::to_string(c["tp"].get<int64_t>()), std::to_string(c["replicas"].get<int64_t>()),
              std::to_string(c["devices"].get<int64_t>()), step(c),
              fmt::format("{:.2f}", c["concurrency"].get<double>()), format_bytes(c["kv_bytes"].get<double>()),
              format_bytes(c["need_bytes"].get<double>()), format_bytes(c["usable_bytes"].get<double>())});
  }
  os << one.render() << "\n" << plan.render();
}

}  // namespace gpuledger::report
