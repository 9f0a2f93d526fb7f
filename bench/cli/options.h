// The shared options of every subcommand (docs/architecture.md "Command line": the names
// are a public interface) and their resolution into ModelConfig, Layout and
// RunConfig. Parsing is CLI11's; resolution errors are ConfigError/LayoutError
// (exit status 2).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "core/device_spec.h"
#include "analytic/kv_cache.h"
#include "core/model_config.h"
#include "core/run_config.h"
#include "core/layout.h"

namespace CLI { class App; }

namespace gpuledger::cli {

// Raw option values, as typed (strings for enums so that errors name the option).
struct Options {
  // model
  std::string model = "gpt2";
  int64_t layers = 0;                 // 0 = the model's own
  // layout
  Layout layout;
  int64_t world = 0;                  // meta: simulated world (0 = dp·tp·pp)
  std::string ranks = "roles";        // roles | all | comma list
  // run
  RunConfig run;
  int64_t gbs = 0;                    // global batch in sequences (0: use --microbatches)
  std::string schedule = "1f1b", recompute = "none", attention = "materialized";
  std::string dtype = "bf16", grad_dtype = "";
  std::optional<double> dropout;      // default: 0.1 for gpt, 0 for llama (their reference setups)
  // device
  std::string device;                 // preset name
  std::string device_memory;          // BYTES with K/M/G/Ki/Mi/Gi suffix
  // kv / infer
  int64_t context = 0, max_model_len = 0, block = 16, requests = 1;
  std::string kv_layout = "paged", kv_dtype = "bf16", kv_scales = "token-head";
  double memory_utilization = 0.9;
  std::string overhead = "0";
  int64_t batch = 0;                  // kv roofline batch (0 = capacity)
  // plan
  std::string train_tokens;           // token budget for the time estimate (default 20·Ψ)
  double assumed_mfu = 0.5;
  // output
  std::string json_path;              // "-" = stdout (the table then goes to stderr)
  bool quiet = false;
};

// Adds the option groups to a subcommand.
void add_model_options(CLI::App& app, Options& o);
void add_layout_options(CLI::App& app, Options& o);
void add_run_options(CLI::App& app, Options& o);
void add_device_options(CLI::App& app, Options& o);
void add_kv_options(CLI::App& app, Options& o);
void add_output_options(CLI::App& app, Options& o);

// "80G" = 80e9, "80Gi" = 80·2^30, "1.5T", "4096"; K/M/G/T decimal, Ki/Mi/Gi/Ti binary.
// Throws std::invalid_argument naming the text.
int64_t parse_size(const std::string& text);

struct Resolved {
  ModelConfig model;
  Layout layout;
  RunConfig run;
  std::optional<DeviceSpec> device;   // a preset, or a custom one from --device-memory
  std::optional<int64_t> device_memory_bytes;
};

// Loads the model, applies --layers, parses enums, derives microbatches from
// --gbs (gbs must be a multiple of mbs·dp), validates the layout. Throws
// ConfigError / LayoutError (exit 2) saying what is wrong.
Resolved resolve(const Options& o);
analytic::KvOptions resolve_kv(const Options& o, const ModelConfig& m);

}  // namespace gpuledger::cli
