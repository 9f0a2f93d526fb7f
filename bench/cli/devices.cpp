// `gpuledger devices`: device presets from datasheets, each figure with its source.
#include <CLI/CLI.hpp>

#include <memory>

#include "bench/cli/commands.h"
#include "bench/report/format.h"
#include "bench/report/report.h"
#include "bench/report/table.h"
#include "core/device_spec.h"

namespace gpuledger::cli {

namespace {}  // namespace

void add_devices_command(CLI::App& root, std::vector<Command>& out) {
  auto opts = std::make_shared<OutputOptions>();  // CLI11 binds to it; the run closure keeps it alive
  auto* app = root.add_subcommand("devices", "list device presets: memory, dense peak FLOP/s, bandwidth, source");
  add_output_options(*app, *opts);
  out.push_back({app, [opts]() {
                   nlohmann::json doc = {{"devices", nlohmann::json::array()}};
                   report::Table t("device presets (dense peaks, no sparsity; unknown = not published)");
                   t.columns({"name", "memory", "bf16", "fp16", "tf32", "fp32", "fp8", "bandwidth", "description"});
                   for (const auto& d : device_presets()) {
                     doc["devices"].push_back(
                         {{"name", d.name},
                          {"description", d.description},
                          {"memory_bytes", d.memory_bytes},
                          {"peak_bf16_flops", report::optional_json(d.peak_bf16_flops)},
                          {"peak_fp16_flops", report::optional_json(d.peak_fp16_flops)},
                          {"peak_tf32_flops", report::optional_json(d.peak_tf32_flops)},
                          {"peak_fp32_flops", report::optional_json(d.peak_fp32_flops)},
                          {"peak_fp8_flops", report::optional_json(d.peak_fp8_flops)},
                          {"bandwidth_bytes_per_s", report::optional_json(d.bandwidth_bytes_per_s)},
                          {"source", d.source},
                          {"aliases", d.aliases}});
                     t.row({d.name, report::format_bytes(static_cast<double>(d.memory_bytes)),
                            report::format_optional_si(d.peak_bf16_flops, "FLOP/s"),
                            report::format_optional_si(d.peak_fp16_flops, "FLOP/s"),
                            report::format_optional_si(d.peak_tf32_flops, "FLOP/s"),
                            report::format_optional_si(d.peak_fp32_flops, "FLOP/s"),
                            report::format_optional_si(d.peak_fp8_flops, "FLOP/s"),
                            report::format_optional_si(d.bandwidth_bytes_per_s, "B/s"), d.description});
                   }
                   for (const auto& d : device_presets())
                     t.note(d.name + ": " + d.source + (d.fp8_source.empty() ? "" : "; " + d.fp8_source));
                   if (!opts->json_path.empty()) report::write_report(doc, opts->json_path);
                   if (!opts->quiet) table_stream(*opts) << t.render();
                   return 0;
                 }});
}

}  // namespace gpuledger::cli
