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

}  // namespace

void print_kv(std::ostream& os, const json& doc) {
  print_config_header(os, doc);
  const json& kv = doc["config"]["kv"];
  os << fmt::format("# kv      {} cache, {} (scales {}), block {}, max-model-len {}, context {}, requests {}\n\n",
                    kv["layout"].get<std::string>(), kv["dtype"].get<std::string>(), kv["scales"].get<std::string>(),
                    kv["block"].get<int64_t>(), kv["max_model_len"].get<int64_t>(), kv["context"].get<int64_t>(),
                    kv["requests"].get<int64_t>());
  Table t("KV cache per rank (2 · layers · kv_heads · head_dim · dtype bytes per token)");
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
}

}  // namespace gpuledger::report
