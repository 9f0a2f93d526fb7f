// `gpuledger models`: the presets with their parameter counts.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

#include "analytic/params.h"
#include "bench/cli/commands.h"
#include "bench/report/format.h"
#include "bench/report/report.h"
#include "bench/report/table.h"

namespace gpuledger::cli {

void add_models_command(CLI::App& root, std::vector<Command>& out) {
  auto opts = std::make_shared<OutputOptions>();  // CLI11 binds to it; the run closure keeps it alive
  auto* app = root.add_subcommand("models", "list model presets with their parameter counts");
  add_output_options(*app, *opts);
  out.push_back(
      {app, [opts]() {
         nlohmann::json doc = {{"models", nlohmann::json::array()}};
         report::Table t("model presets (models/presets/*.json); params = published count, tied counted once");
         t.columns(
             {"name", "flavour", "layers", "hidden", "heads", "kv", "head_dim", "ffn", "vocab", "max_seq", "params"});
         for (const auto& name : preset_names()) {
           const ModelConfig m = load_model(name);
           const int64_t params = analytic::model_params(m);
           nlohmann::json j = report::model_json(m);
           j["params"] = params;
           j["non_embedding_params"] = analytic::non_embedding_params(m);
           j["active_params"] = analytic::active_params(m);
           // DeepSeek-V3's multi-token prediction module, counted apart from Ψ (docs/formulas/mla.md).
           if (m.mtp_modules > 0) j["mtp_params"] = analytic::mtp_params(m);
           doc["models"].push_back(j);
           t.row({m.name, m.is_gpt() ? "gpt" : "llama", std::to_string(m.layers), std::to_string(m.hidden),
                  std::to_string(m.heads), std::to_string(m.kv_heads), std::to_string(m.head_dim),
                  std::to_string(m.ffn), std::to_string(m.vocab), std::to_string(m.max_seq),
                  report::format_count(params)});
         }
         if (!opts->json_path.empty()) report::write_report(doc, opts->json_path);
         if (!opts->quiet) table_stream(*opts) << t.render();
         return 0;
       }});
}

}  // namespace gpuledger::cli
