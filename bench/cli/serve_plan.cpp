// `gpuledger serve-plan`: which device, and how many, serve a request rate —
// per device the decode step from the roofline, the concurrency by Little's
// law, the KV cache it needs (at a percentile of a trace's lengths when one is
// given) and whether weights + KV + activations + workspaces fit at the
// headroom. Options → run::ServePlanRequest; figures from run::run_serve_plan
// (bench/run/serve_plan_run.h); formulas in analytic/serving_plan.h.
#include <CLI/CLI.hpp>

#include "bench/cli/commands.h"
#include "bench/report/report.h"
#include "bench/report/serve_plan_json.h"
#include "bench/report/serve_plan_tables.h"
#include "bench/run/serve_plan_run.h"
#include "core/checked_math.h"
#include "core/limits.h"
#include "models/transformer/request_trace.h"

namespace gpuledger::cli {

namespace {

constexpr const char* kServingGroup = "Serving";

struct ServePlanOptions {
  ConfigOptions config;
  double qps = 0;
  double prompt_tokens = 0, output_tokens = 0;
  std::string trace;
  double percentile = 95, headroom = 1.2;
  double ttft_ms = 0, tpot_ms = 0;  // 0: no target
  std::vector<std::string> devices = {"a10g", "a100-40gb"};
  double mbu = 0.6, mfu = 0.5, memory_utilization = 0.9;
  std::string cuda_context = "512Mi";
  int64_t prefill_chunk = 2048;
  OutputOptions output;
};

run::ServePlanRequest make_request(const ServePlanOptions& o, const CLI::App& app) {
  run::ServePlanRequest q;
  q.config = resolve_config(o.config);
  q.qps = o.qps;
  if (!o.trace.empty()) {
    if (app.count("--prompt-tokens") > 0 || app.count("--output-tokens") > 0)
      throw ConfigError("trace", "--trace gives the lengths: drop --prompt-tokens/--output-tokens");
    const auto shapes = read_trace(o.trace);
    std::vector<int64_t> totals;
    double prompt = 0, output = 0;
    for (const auto& s : shapes) {
      totals.push_back(checked_add(s.prompt_len, s.gen_len, "a request's total length"));
      prompt += static_cast<double>(s.prompt_len);
      output += static_cast<double>(s.gen_len);
    }
    q.prompt_tokens = prompt / static_cast<double>(shapes.size());
    q.output_tokens = output / static_cast<double>(shapes.size());
    q.trace_totals = totals;
    q.trace_source = "trace " + o.trace;
  } else {
    if (app.count("--prompt-tokens") == 0 || app.count("--output-tokens") == 0)
      throw ConfigError("prompt-tokens", "give --prompt-tokens and --output-tokens, or --trace");
    if (app.count("--percentile") > 0) throw ConfigError("percentile", "--percentile applies to --trace");
    q.prompt_tokens = o.prompt_tokens;
    q.output_tokens = o.output_tokens;
  }
  q.percentile = o.percentile;
  q.headroom = o.headroom;
  if (app.count("--ttft-ms") > 0) q.ttft_ms = o.ttft_ms;
  if (app.count("--tpot-ms") > 0) q.tpot_ms = o.tpot_ms;
  for (const auto& name : o.devices) {
    const auto d = find_device(name);
    if (!d) throw ConfigError("devices", "unknown device '" + name + "' (gpuledger devices lists them)");
    q.devices.push_back(*d);
  }
  q.mbu = o.mbu;
  q.mfu = o.mfu;
  q.memory_utilization = o.memory_utilization;
  q.cuda_context_bytes = parse_size(o.cuda_context);
  if (q.cuda_context_bytes < 0) throw ConfigError("cuda-context", "--cuda-context must be >= 0");
  q.prefill_chunk = o.prefill_chunk;
  return q;
}

void bind(CLI::App& app, ServePlanOptions& o) {
  using O = ConfigOption;
  o.config.use = ModelUse::kKvSizing;
  add_config_options(app, o.config, {O::kModel, O::kLayers, O::kAttention, O::kDtype});
  const auto g = kServingGroup;
  app.add_option("--qps", o.qps, "requests per second (λ)")->required()->group(g);
  app.add_option("--prompt-tokens", o.prompt_tokens, "mean prompt tokens per request")->group(g);
  app.add_option("--output-tokens", o.output_tokens, "mean generated tokens per request")->group(g);
  app.add_option("--trace", o.trace,
                 "JSONL requests ({\"prompt_len\", \"gen_len\"} per line): mean lengths, and the KV sized at "
                 "--percentile of their totals")
      ->group(g);
  app.add_option("--percentile", o.percentile, "with --trace: the percentile of the total lengths")
      ->capture_default_str()
      ->group(g);
  app.add_option("--headroom", o.headroom, "size the KV for HEADROOM × the concurrency (1.2: keep 20%)")
      ->capture_default_str()
      ->group(g);
  app.add_option("--ttft-ms", o.ttft_ms, "target time to first token (the prefill of a mean prompt)")->group(g);
  app.add_option("--tpot-ms", o.tpot_ms, "target time per output token")->group(g);
  app.add_option("--devices", o.devices, "device presets to compare (gpuledger devices)")
      ->delimiter(',')
      ->capture_default_str()
      ->group(g);
  app.add_option("--mbu", o.mbu, "achieved fraction of the memory bandwidth in decode (assumed; measure it)")
      ->capture_default_str()
      ->group(g);
  app.add_option("--mfu", o.mfu, "achieved fraction of the peak FLOP/s in prefill (assumed; measure it)")
      ->capture_default_str()
      ->group(g);
  app.add_option("--memory-utilization", o.memory_utilization,
                 "vLLM gpu_memory_utilization: the share of device memory the engine may use")
      ->capture_default_str()
      ->group(g);
  app.add_option("--cuda-context", o.cuda_context, "BYTES of the CUDA context, outside the engine's share (assumed)")
      ->capture_default_str()
      ->group(g);
  app.add_option("--prefill-chunk", o.prefill_chunk, "tokens per prefill forward: sizes the activation peak")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, limits::kMaxTokens))
      ->group(g);
  add_output_options(app, o.output);
}

}  // namespace

void add_serve_plan_command(CLI::App& root, std::vector<Command>& out) {
  auto* app = root.add_subcommand("serve-plan",
                                  "which device and how many serve a request rate: Little's law, the decode "
                                  "roofline and the memory fit per device");
  auto o = std::make_shared<ServePlanOptions>();
  bind(*app, *o);
  out.push_back({app, [o, app] {
                   const auto doc = report::serve_plan_report_json(run::run_serve_plan(make_request(*o, *app)));
                   if (!o->output.json_path.empty()) report::write_report(doc, o->output.json_path);
                   if (!o->output.quiet) report::print_serve_plan(table_stream(o->output), doc);
                   return 0;
                 }});
}

}  // namespace gpuledger::cli
