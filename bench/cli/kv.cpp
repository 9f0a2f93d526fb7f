// `gpuledger kv`: the analytic KV cache — bytes per token per rank, the
// reservation for N sequences (contiguous or paged), capacity under vLLM's
// memory rule, and the decode roofline. The options are parsed into a
// run::KvRequest; the figures come from run::run_kv (bench/run/kv_run.h).
#include <CLI/CLI.hpp>

#include "bench/cli/commands.h"
#include "bench/cli/input_checks.h"
#include "bench/report/kv_json.h"
#include "bench/report/kv_tables.h"
#include "bench/report/report.h"
#include "bench/run/kv_run.h"
#include "core/checked_math.h"
#include "core/limits.h"
#include "models/transformer/request_trace.h"

namespace gpuledger::cli {

namespace {

class KvCommand : public RunCommand {
 public:
  void bind(CLI::App& app) override {
    using O = ConfigOption;
    config_.attention = "flash";  // infer's default: the activation estimate is the one infer measures
    config_.use = ModelUse::kKvSizing;
    add_config_options(app, config_,
                       {O::kModel, O::kLayers, O::kDp, O::kTp, O::kPp, O::kSp, O::kRanks, O::kSeq, O::kAttention,
                        O::kDtype, O::kDevice, O::kDeviceMemory});
    add_kv_cache_options(app, cache_);
    app.add_option("--batch", batch_, "decode batch for the roofline (default: the capacity)")
        ->check(CLI::Range(int64_t{1}, limits::kMaxBatch))
        ->group(kKvCacheGroup);
    app.add_option("--prefill-chunk", prefill_chunk_,
                   "tokens per prefill forward: sizes the activation peak (vLLM max_num_batched_tokens; "
                   "default: vLLM's for the device, 8192 at >= 70 GiB but A100, else 2048)")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))
        ->group(kKvCacheGroup);
    app.add_option("--non-torch", non_torch_, "vLLM: BYTES allocated outside torch after its baseline snapshot")
        ->capture_default_str()
        ->group(kKvCacheGroup);
    app.add_option("--cuda-graph", cuda_graph_, "vLLM: BYTES of its CUDA-graph memory estimate, when applied")
        ->capture_default_str()
        ->group(kKvCacheGroup);
    add_length_options(app);
    add_output_options(app, output_);
  }
  OutputOptions& output() override { return output_; }

  void check_inputs() const override {
    check_config_inputs(config_);
    check_size_input("overhead", cache_.overhead);
    check_size_input("non-torch", non_torch_);
    check_size_input("cuda-graph", cuda_graph_);
    check_trace_input(trace_);
  }
  void validate() const override { request(); }

  int run() const override {
    const auto doc = report::kv_report_json(run::run_kv(request()));
    if (!output_.json_path.empty()) report::write_report(doc, output_.json_path);
    if (!output_.quiet) report::print_kv(table_stream(output_), doc);
    return 0;
  }

 private:
  run::KvRequest request() const {
    run::KvRequest q;
    q.config = resolve_config(config_);
    q.kv = resolve_kv_options(cache_, q.config.model);
    q.context = cache_.context > 0 ? cache_.context : q.config.run.seq;
    q.requests = cache_.requests;
    q.memory_utilization = cache_.memory_utilization;
    q.overhead_bytes = parse_size(cache_.overhead);
    if (batch_ > 0) q.batch = batch_;
    q.prefill_chunk = prefill_chunk_;
    q.non_torch_bytes = parse_size(non_torch_);
    q.cuda_graph_bytes = parse_size(cuda_graph_);
    q.ranks = select_ranks(config_.ranks, q.config.layout, q.config.layout.world());
    q.lengths = resolve_lengths();
    return q;
  }

  // Capacity at a percentile of the requests' total lengths (docs/serving-plan.md).
  void add_length_options(CLI::App& app) {
    auto* trace = app.add_option("--trace", trace_,
                                 "JSONL requests ({\"prompt_len\", \"gen_len\"} per line): size the cache at a "
                                 "percentile of their total lengths, beside the mean")
                      ->group(kKvCacheGroup);
    auto* dist = app.add_option("--length-dist", length_dist_,
                                "total lengths (prompt + generated) as a list, e.g. 700,900,1500: as --trace")
                     ->delimiter(',')
                     ->check(CLI::Range(int64_t{1}, limits::kMaxTokens))
                     ->group(kKvCacheGroup);
    trace->excludes(dist);
    // Checked as the values are read (run::run_kv checks them again), so that
    // a sweep's --grid percentile=0 is a bad value, not a refused point.
    percentile_opt_ =
        app.add_option("--percentile", percentile_, "with --trace/--length-dist: the percentile of the lengths")
            ->capture_default_str()
            ->check(CLI::Validator(
                [](std::string& text) -> std::string {
                  double v = 0;
                  if (!CLI::detail::lexical_cast(text, v)) return "'" + text + "' is not a number";
                  return v > 0 && v <= 100 ? "" : "'" + text + "' is outside (0, 100]";
                },
                "(0, 100]"))
            ->group(kKvCacheGroup);
    headroom_opt_ = finite_in(app.add_option("--headroom", headroom_,
                                             "with --trace/--length-dist: plan pool / HEADROOM (1.2: keep 20%)"),
                              1.0, 100.0)
                        ->capture_default_str()
                        ->group(kKvCacheGroup);
  }
  std::optional<run::KvLengths> resolve_lengths() const {
    if (trace_.empty() && length_dist_.empty()) {
      if (percentile_opt_->count() > 0 || headroom_opt_->count() > 0)
        throw ConfigError("percentile", "--percentile and --headroom apply to --trace or --length-dist: give one");
      return std::nullopt;
    }
    run::KvLengths k;
    k.percentile = percentile_;
    k.headroom = headroom_;
    if (!trace_.empty()) {
      for (const auto& r : read_trace(trace_))
        k.totals.push_back(checked_add(r.prompt_len, r.gen_len, "a request's total length"));
      k.source = "trace " + trace_;
    } else {
      k.totals = length_dist_;
      k.source = "--length-dist";
    }
    return k;
  }

  ConfigOptions config_;
  KvCacheOptions cache_;
  int64_t batch_ = 0;          // 0: the capacity
  int64_t prefill_chunk_ = 0;  // 0: vLLM's default for the device
  std::string non_torch_ = "0", cuda_graph_ = "0";
  std::string trace_;
  std::vector<int64_t> length_dist_;
  double percentile_ = 95, headroom_ = 1.2;
  CLI::Option* percentile_opt_ = nullptr;
  CLI::Option* headroom_opt_ = nullptr;
  OutputOptions output_;
};

}  // namespace

std::unique_ptr<RunCommand> make_kv_command() { return std::make_unique<KvCommand>(); }

}  // namespace gpuledger::cli
