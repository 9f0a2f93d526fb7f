// `gpuledger infer`: serve a stream of requests with a real KV cache on one
// rank and report what the cache really booked, assigned and used, the
// waste, the capacity measured by filling the pool next to the `kv`
// prediction, preemptions, prefill and decode throughput, decode bytes per
// step against the measured (cpu) or datasheet bandwidth, MFU beside it, and
// the attention error of the KV dtype against bf16. The options are parsed
// into a run::InferRequest; the run is run::run_infer (bench/run/infer_run.h).
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>

#include "bench/cli/checkpoint_options.h"
#include "bench/cli/commands.h"
#include "bench/cli/input_checks.h"
#include "bench/exit_codes.h"
#include "bench/report/checks.h"
#include "bench/report/infer_json.h"
#include "bench/report/infer_tables.h"
#include "bench/report/report.h"
#include "bench/run/infer_run.h"
#include "core/attention_pattern.h"
#include "core/checked_math.h"
#include "core/limits.h"
#include "models/io/token_file.h"

namespace gpuledger::cli {

namespace {

class InferCommand : public RunCommand {
 public:
  void bind(CLI::App& app) override;
  OutputOptions& output() override { return output_; }
  int run() const override;
  void check_inputs() const override;
  void validate() const override { request(); }

 private:
  run::InferRequest request() const;

  ConfigOptions config_;
  CheckpointOptions checkpoint_;
  KvCacheOptions cache_;
  std::string backend_ = "cpu";
  int64_t prompt_len_ = 128, gen_len_ = 32, max_batch_ = 256, prefill_chunk_ = 2048, prefix_len_ = 0;
  int64_t kv_outliers_ = 0;
  std::string trace_;
  std::optional<double> peak_flops_;
  std::optional<double> arrival_rate_;
  bool no_prefix_caching_ = false;
  std::string preemption_ = "recompute";
  OutputOptions output_;
};

void InferCommand::bind(CLI::App& app) {
  using O = ConfigOption;
  // A serving engine attends flash-like (vLLM's backends): the default here, unlike train's.
  config_.attention = "flash";
  config_.use = ModelUse::kInfer;
  add_config_options(app, config_,
                     {O::kModel, O::kLayers, O::kTp, O::kDtype, O::kSeed, O::kDevice, O::kDeviceMemory, O::kAttention});
  add_kv_cache_options(app, cache_);
  const char* g = "Infer";
  const auto tokens = CLI::Range(int64_t{1}, limits::kMaxTokens);
  const auto batch = CLI::Range(int64_t{1}, limits::kMaxBatch);
  app.add_option("--backend", backend_, "cpu | meta (no memory touched) | cuda")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "meta", "cuda"}))
      ->group(g);
  app.add_option("--prompt-len", prompt_len_, "prompt tokens per request")
      ->capture_default_str()
      ->check(tokens)
      ->group(g);
  app.add_option("--gen-len", gen_len_, "tokens generated per request")->capture_default_str()->check(tokens)->group(g);
  // Checked when read (read_trace): a regular file under the size cap, no control characters in the name.
  app.add_option("--trace", trace_, "JSONL requests: {\"prompt_len\", \"gen_len\", \"arrival\"} per line")->group(g);
  app.add_option("--max-batch", max_batch_, "running sequences at most (vLLM max_num_seqs)")
      ->capture_default_str()
      ->check(batch)
      ->group(g);
  app.add_option("--max-num-batched-tokens,--prefill-chunk", prefill_chunk_,
                 "new tokens per step, decodes and prefill chunks together (vLLM's name); also the profiling forward")
      ->capture_default_str()
      ->check(tokens)
      ->group(g);
  finite_in(app.add_option("--arrival-rate", arrival_rate_,
                           "Poisson arrivals, requests/s on the engine clock (seeded by --seed); default: all at 0"),
            1e-6, 1e9)
      ->group(g);
  app.add_option("--preemption", preemption_,
                 "recompute (free the cache, recompute later) | swap (blocks to host memory and back; paged)")
      ->capture_default_str()
      ->check(CLI::IsMember({"recompute", "swap"}))
      ->group(g);
  app.add_flag("--no-prefix-caching", no_prefix_caching_, "no prefix caching by block hash (on by default, as vLLM v1)")
      ->group(g);
  app.add_option("--prefix-len", prefix_len_, "prompt tokens every request shares (prefix sharing, paged)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, limits::kMaxTokens))
      ->group(g);
  app.add_option("--kv-outliers", kv_outliers_, "key channels scaled ×50 in the KV-error side run")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20))
      ->group(g);
  finite_in(app.add_option("--peak-flops", peak_flops_, "peak FLOP/s for the MFU"), 1.0, 1e21)->group(g);
  add_checkpoint_options(app, checkpoint_, /*training=*/false);
  add_output_options(app, output_);
}

void InferCommand::check_inputs() const {
  check_config_inputs(config_);
  check_size_input("overhead", cache_.overhead);
  check_trace_input(trace_);
  check_checkpoint_inputs(checkpoint_);
}

run::InferRequest InferCommand::request() const {
  run::InferRequest q;
  q.config = resolve_with_checkpoint(config_, checkpoint_, backend_, /*training=*/false);
  const ModelConfig& m = q.config.model;
  if (!q.config.device_memory_bytes)
    throw ConfigError("device", "infer sizes its KV pool from device memory: give --device or --device-memory");
  // The engine's caches give every layer one window; a hybrid model's
  // per-layer caches (`kv` and `serve-plan` size them) are not served yet.
  if (!uniform_attention(m))
    throw ConfigError("attention_pattern", "infer: " + m.name +
                                               " has layers of different attention windows (attention_pattern); the "
                                               "engine's KV cache gives every layer one window: use `gpuledger kv` "
                                               "or `serve-plan` to size it");
  q.kv = resolve_kv_options(cache_, m);
  q.backend = backend_;
  if (!trace_.empty())
    q.shapes = read_trace(trace_);
  else
    q.shapes.assign(static_cast<size_t>(cache_.requests), RequestShape{prompt_len_, gen_len_, 0});
  if (arrival_rate_) {
    for (const auto& s : q.shapes)
      if (s.arrival_s > 0 || s.arrival > 0)
        throw ConfigError("arrival-rate", "--arrival-rate and a trace with arrival times both give arrivals: use one");
    const auto times = poisson_arrivals(static_cast<int64_t>(q.shapes.size()), *arrival_rate_, q.config.run.seed);
    for (size_t i = 0; i < q.shapes.size(); ++i) q.shapes[i].arrival_s = times[i];
  }
  // Refused from the lengths alone, before a weight is allocated or a prompt
  // made: a request whose KV cache cannot fit in utilization × device memory,
  // and prompts past the limit on tokens materialized at once.
  int64_t longest = 0, prompt_tokens = 0;
  for (const auto& s : q.shapes) {
    longest = std::max(longest, s.prompt_len + s.gen_len);
    prompt_tokens = checked_add(prompt_tokens, s.prompt_len, "prompt tokens of all requests");
  }
  if (prompt_tokens > limits::kMaxPromptTokens)
    throw ConfigError("requests", fmt::format("the requests hold {} prompt tokens, above the limit of {}",
                                              prompt_tokens, limits::kMaxPromptTokens));
  const double usable = cache_.memory_utilization * static_cast<double>(*q.config.device_memory_bytes);
  const int64_t one_bytes = analytic::kv_reserved_bytes(m, q.config.layout, q.kv, 1, longest);
  if (static_cast<double>(one_bytes) > usable)
    throw ConfigError("requests", fmt::format("a request of {} tokens (prompt + generated) needs {} bytes of KV cache, "
                                              "more than utilization × device memory ({:.0f} bytes): it cannot fit",
                                              longest, one_bytes, usable));
  q.context = cache_.context > 0 ? cache_.context : longest;
  if (q.kv.layout == KvLayout::kContiguous && q.context > q.kv.max_model_len)
    throw LayoutError(fmt::format("--context {} exceeds --max-model-len {}", q.context, q.kv.max_model_len));
  if (prefix_len_ > 0)
    for (const auto& s : q.shapes)
      if (s.prompt_len < prefix_len_) throw ConfigError("prefix-len", "--prefix-len is longer than a prompt");
  if (!checkpoint_.tokens.empty()) {
    int64_t longest_prompt = 0;
    for (const auto& s : q.shapes) longest_prompt = std::max(longest_prompt, s.prompt_len);
    TokenFile(checkpoint_.tokens).check_prompts(longest_prompt, m.vocab);
  }
  q.prompt_len = prompt_len_;
  q.gen_len = gen_len_;
  q.trace = trace_;
  q.max_batch = max_batch_;
  q.prefill_chunk = m.is_gpt() ? std::min(prefill_chunk_, m.max_seq) : prefill_chunk_;
  q.prefix_len = prefix_len_;
  q.prefix_caching = !no_prefix_caching_;
  if (preemption_ == "swap" && q.kv.layout != KvLayout::kPaged)
    throw ConfigError("preemption", "--preemption swap moves blocks: it needs --kv paged");
  const KvPolicy policy = q.kv.eviction.policy;
  const bool scattered = policy == KvPolicy::kSink || policy == KvPolicy::kH2O;
  if (preemption_ == "swap" && scattered)
    throw ConfigError("preemption", "--preemption swap with --kv-policy " + cache_.kv_policy +
                                        ": a swapped sequence's scattered slots are not restored; use recompute");
  if (backend_ == "cuda" && scattered)
    throw ConfigError("kv-policy", "--kv-policy " + cache_.kv_policy +
                                       " runs on the cpu and meta backends (the CUDA attention kernel reads no slot "
                                       "map)");
  if (q.config.run.attention == AttentionKind::kMaterialized && q.kv.eviction.evicts())
    throw ConfigError("attention", "--attention materialized with --kv-policy " + cache_.kv_policy +
                                       ": the policy reads the cache's attention weights; use --attention flash");
  q.preemption = preemption_;
  q.arrival_rate = arrival_rate_;
  q.kv_outliers = kv_outliers_;
  q.memory_utilization = cache_.memory_utilization;
  q.overhead_bytes = parse_size(cache_.overhead);
  q.peak_flops = peak_flops_;
  return q;
}

int InferCommand::run() const {
  const run::InferRecord rec = run::run_infer(request());
  if (rec.exit_without_report) return *rec.exit_without_report;
  const nlohmann::json doc = report::infer_report_json(rec);
  if (!output_.json_path.empty()) report::write_report(doc, output_.json_path);
  if (!output_.quiet) report::print_infer_summary(table_stream(output_), doc);
  return run_report_exit_status(doc, "infer");
}

}  // namespace

std::unique_ptr<RunCommand> make_infer_command() { return std::make_unique<InferCommand>(); }

}  // namespace gpuledger::cli
