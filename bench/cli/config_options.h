// The options that say what is run (model, layout, run settings, device), the
// KV-cache options, the output options, and their resolution into a
// ResolvedConfig (core/resolved_config.h). The names are a public interface
// (docs/architecture.md "Command line"). Each subcommand registers only the
// options it uses. Parsing is CLI11's; resolution errors are
// ConfigError/LayoutError (exit status 2).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>
#include "core/kv_types.h"

#include "analytic/kv_cache.h"
#include "bench/cli/size_options.h"
#include "core/model_support.h"
#include "core/resolved_config.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace gpuledger::cli {

// Raw option values, as typed (strings for enums so that errors name the option).
struct ConfigOptions {
  std::string model = "gpt2";
  int64_t layers = 0;  // 0 = the model's own
  Layout layout;
  std::string ranks = "roles";  // roles | all | comma list
  RunConfig run;
  int64_t gbs = 0;  // global batch in sequences (0: use --microbatches)
  std::string schedule = "1f1b", recompute = "none", attention = "materialized";
  std::string dtype = "bf16", grad_dtype = "";
  std::string fp8_recipe = "delayed";  // with --dtype fp8 (core/fp8.h)
  std::string optimizer = "adamw";
  std::string offload = "none";           // none | optimizer
  std::optional<double> dropout;          // default: 0.1 for gpt, 0 for llama (their reference setups)
  std::optional<double> capacity_factor;  // MoE: overrides the model file's capacity_factor
  std::string device;                     // preset name
  std::string device_memory;              // BYTES with K/M/G/Ki/Mi/Gi suffix
  ModelUse use = ModelUse::kRun;          // not an option: infer serves, kv and serve-plan only size the cache
};

// One option of ConfigOptions each; a subcommand lists those it uses.
enum class ConfigOption {
  kModel,
  kLayers,
  kDp,
  kTp,
  kPp,
  kZero,
  kSp,
  kVpp,
  kCp,
  kEp,
  kRanks,
  kSeq,
  kMbs,
  kGbs,
  kMicrobatches,
  kSchedule,
  kRecompute,
  kAttention,
  kDtype,
  kGradDtype,
  kFp8Recipe,
  kDropout,
  kCapacityFactor,
  kSeed,
  kBucketMb,
  kOverlapGradReduce,
  kTpCommOverlap,
  kContiguousGradBuffer,
  kPrefetch,
  kOptimizer,
  kMomentum,
  kOffload,
  kDevice,
  kDeviceMemory,
};

// Every option of a training run: what plan budgets and train runs.
inline constexpr std::initializer_list<ConfigOption> kTrainingConfigOptions = {ConfigOption::kModel,
                                                                               ConfigOption::kLayers,
                                                                               ConfigOption::kDp,
                                                                               ConfigOption::kTp,
                                                                               ConfigOption::kPp,
                                                                               ConfigOption::kZero,
                                                                               ConfigOption::kSp,
                                                                               ConfigOption::kVpp,
                                                                               ConfigOption::kCp,
                                                                               ConfigOption::kEp,
                                                                               ConfigOption::kRanks,
                                                                               ConfigOption::kSeq,
                                                                               ConfigOption::kMbs,
                                                                               ConfigOption::kGbs,
                                                                               ConfigOption::kMicrobatches,
                                                                               ConfigOption::kSchedule,
                                                                               ConfigOption::kRecompute,
                                                                               ConfigOption::kAttention,
                                                                               ConfigOption::kDtype,
                                                                               ConfigOption::kGradDtype,
                                                                               ConfigOption::kFp8Recipe,
                                                                               ConfigOption::kDropout,
                                                                               ConfigOption::kCapacityFactor,
                                                                               ConfigOption::kSeed,
                                                                               ConfigOption::kBucketMb,
                                                                               ConfigOption::kOverlapGradReduce,
                                                                               ConfigOption::kTpCommOverlap,
                                                                               ConfigOption::kContiguousGradBuffer,
                                                                               ConfigOption::kPrefetch,
                                                                               ConfigOption::kOptimizer,
                                                                               ConfigOption::kMomentum,
                                                                               ConfigOption::kOffload,
                                                                               ConfigOption::kDevice,
                                                                               ConfigOption::kDeviceMemory};

// The check every floating option carries: the value is finite and in
// [min, max]. CLI11's Range alone lets NaN through (every comparison with NaN
// is false) and takes "inf". Returns `opt` for chaining.
CLI::Option* finite_in(CLI::Option* opt, double min, double max);
// "" when v is finite and in [min, max]; else the message, after "OPTION: " when `option` is given.
std::string check_finite(const std::string& option, double v, double min, double max);

// Registers `which` (in the order of ConfigOption, whatever the order of `which`).
void add_config_options(CLI::App& app, ConfigOptions& o, std::initializer_list<ConfigOption> which);

// The KV cache of kv and infer.
struct KvCacheOptions {
  int64_t context = 0, max_model_len = 0, block = 16, requests = 1;
  std::string kv_layout = "paged", kv_dtype = "bf16";
  std::string kv_scales;                    // "" = the format's own: token-head (fp8, int8), group (int4)
  int64_t kv_group_size = kKvDefaultGroup;  // channels per int4 scale group
  double memory_utilization = 0.92;         // vLLM's gpu_memory_utilization default (vllm/config/cache.py)
  std::string overhead = "0";               // BYTES outside the ledger
  std::string kv_policy = "full";           // full | window | sink | h2o (core/kv_types.h)
  int64_t kv_budget = 0;                    // tokens kept per sequence under a policy
  int64_t kv_sink_tokens = kKvDefaultSinkTokens;
};
void add_kv_cache_options(CLI::App& app, KvCacheOptions& o);
inline constexpr const char* kKvCacheGroup = "KV cache";

struct OutputOptions {
  std::string json_path;  // "-" = stdout (the table then goes to stderr)
  bool quiet = false;
};
void add_output_options(CLI::App& app, OutputOptions& o);
// Where the human-readable table goes: stdout, or stderr when the JSON report goes to stdout.
std::ostream& table_stream(const OutputOptions& o);

// Loads the model (or takes `model`, e.g. a checkpoint's config.json), applies
// --layers, parses enums, derives microbatches from --gbs (gbs must be a
// multiple of mbs·dp), validates the layout. Throws ConfigError / LayoutError
// (exit 2) saying what is wrong.
ResolvedConfig resolve_config(const ConfigOptions& o, const ModelConfig* model = nullptr);
// --device (a preset, whose memory it sets) or --device-memory into r;
// ConfigError naming an unknown device or a bad size.
void resolve_device(const ConfigOptions& o, ResolvedConfig& r);
analytic::KvOptions resolve_kv_options(const KvCacheOptions& o, const ModelConfig& m);
// --kv-policy, --kv-budget, --kv-sink-tokens: a budget only with a policy, a
// policy only with a budget, fewer sinks than the budget, and on a
// sliding-window model only the window policy. ConfigError (exit 2) otherwise.
KvEviction resolve_kv_eviction(const KvCacheOptions& o, const ModelConfig& m);

// --ranks: "roles" (one per pipeline stage), "all", or a comma list of ranks < world.
std::vector<int64_t> select_ranks(const std::string& spec, const Layout& l, int64_t world);

}  // namespace gpuledger::cli
