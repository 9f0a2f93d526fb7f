// Option registration and resolution (see config_options.h).
#include "bench/cli/config_options.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "analytic/budget.h"
#include "bench/cli/fp8_options.h"
#include "bench/report/report.h"
#include "core/limits.h"
#include "core/model_support.h"

namespace gpuledger::cli {

namespace {
// The description a floating option's check shows in --help.
std::string finite_range_text(double min, double max) {
  std::ostringstream os;
  os << "FINITE in [" << min << ", " << max << "]";
  return os.str();
}
}  // namespace

CLI::Option* finite_in(CLI::Option* opt, double min, double max) {
  // CLI11 puts the option's name in front of the message.
  opt->check(CLI::Validator(
      [min, max](std::string& text) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v)) return "'" + text + "' is not a number";
        return check_finite("", v, min, max);
      },
      finite_range_text(min, max)));
  return opt;
}

std::string check_finite(const std::string& option, double v, double min, double max) {
  std::ostringstream os;
  if (!option.empty() && (!std::isfinite(v) || v < min || v > max)) os << option << ": ";
  if (!std::isfinite(v))
    os << v << " is not a finite number";
  else if (v < min || v > max)
    os << v << " is outside [" << min << ", " << max << "]";
  return os.str();
}

namespace {
// Dimensions and counts: the stated limits (core/limits.h) at parse time.
const auto kTokenRange = CLI::Range(int64_t{1}, limits::kMaxTokens);
const auto kWorldRange = CLI::Range(int64_t{1}, limits::kMaxWorld);
const auto kBatchRange = CLI::Range(int64_t{1}, limits::kMaxBatch);
}  // namespace

namespace {

constexpr const char* kModelGroup = "Model";
constexpr const char* kLayoutGroup = "Layout (world = dp·tp·pp)";
constexpr const char* kRunGroup = "Run";
constexpr const char* kDeviceGroup = "Device";

// The model and layout options.
CLI::Option* add_model_or_layout(CLI::App& app, ConfigOptions& o, ConfigOption which) {
  switch (which) {
    case ConfigOption::kModel:
      return app.add_option("--model", o.model, "preset name (gpuledger models) or path to a model JSON file")
          ->capture_default_str()
          ->group(kModelGroup);
    case ConfigOption::kLayers:
      return app.add_option("--layers", o.layers, "keep the model's layer shape with N layers")
          ->check(CLI::Range(int64_t{1}, limits::kMaxLayers))
          ->group(kModelGroup);
    case ConfigOption::kDp:
      return app.add_option("--dp", o.layout.dp, "data-parallel size")
          ->capture_default_str()
          ->check(kWorldRange)
          ->group(kLayoutGroup);
    case ConfigOption::kTp:
      return app.add_option("--tp", o.layout.tp, "tensor-parallel size")
          ->capture_default_str()
          ->check(kWorldRange)
          ->group(kLayoutGroup);
    case ConfigOption::kPp:
      return app.add_option("--pp", o.layout.pp, "pipeline-parallel size")
          ->capture_default_str()
          ->check(kWorldRange)
          ->group(kLayoutGroup);
    case ConfigOption::kZero:
      return app.add_option("--zero", o.layout.zero, "ZeRO stage over the DP group (0-3)")
          ->capture_default_str()
          ->check(CLI::Range(0, 3))
          ->group(kLayoutGroup);
    case ConfigOption::kSp:
      return app.add_flag("--sp", o.layout.sp, "sequence parallelism (Megatron; with --tp > 1)")->group(kLayoutGroup);
    case ConfigOption::kVpp:
      return app
          .add_option("--vpp", o.layout.vpp,
                      "virtual pipeline stages (model chunks) per pipeline rank: interleaved 1F1B (Megatron)")
          ->capture_default_str()
          ->check(kWorldRange)
          ->group(kLayoutGroup);
    case ConfigOption::kCp:
      return app
          .add_option("--cp", o.layout.cp,
                      "context-parallel size: each sequence split over cp ranks, ring attention (Megatron)")
          ->capture_default_str()
          ->check(kWorldRange)
          ->group(kLayoutGroup);
    case ConfigOption::kEp:
      return app.add_option("--ep", o.layout.ep, "expert-parallel size (MoE): experts / ep per rank, out of dp")
          ->capture_default_str()
          ->check(kWorldRange)
          ->group(kLayoutGroup);
    case ConfigOption::kRanks:
      return app
          .add_option("--ranks", o.ranks, "ranks to report: roles (one per pipeline stage), all, or a list 0,5,9")
          ->capture_default_str()
          ->group(kLayoutGroup);
    default: return nullptr;
  }
}

// The run options.
CLI::Option* add_run(CLI::App& app, ConfigOptions& o, ConfigOption which) {
  switch (which) {
    case ConfigOption::kSeq:
      return app.add_option("--seq", o.run.seq, "tokens per sequence")
          ->capture_default_str()
          ->check(kTokenRange)
          ->group(kRunGroup);
    case ConfigOption::kMbs:
      return app.add_option("--mbs", o.run.mbs, "micro-batch size (sequences)")
          ->capture_default_str()
          ->check(kBatchRange)
          ->group(kRunGroup);
    case ConfigOption::kGbs:
      return app.add_option("--gbs", o.gbs, "global batch (sequences); microbatches = gbs / (mbs·dp)")
          ->check(CLI::Range(int64_t{1}, limits::kMaxGlobalBatch))
          ->group(kRunGroup);
    case ConfigOption::kMicrobatches:
      return app.add_option("--microbatches", o.run.microbatches, "microbatches per step per DP replica")
          ->capture_default_str()
          ->check(kBatchRange)
          ->group(kRunGroup);
    case ConfigOption::kSchedule:
      return app.add_option("--schedule", o.schedule, "pipeline schedule")
          ->capture_default_str()
          ->check(CLI::IsMember({"1f1b", "gpipe"}))
          ->group(kRunGroup);
    case ConfigOption::kRecompute:
      return app.add_option("--recompute", o.recompute, "activation recomputation")
          ->capture_default_str()
          ->check(CLI::IsMember({"none", "selective", "full"}))
          ->group(kRunGroup);
    case ConfigOption::kAttention:
      return app.add_option("--attention", o.attention, "attention kernel")
          ->capture_default_str()
          ->check(CLI::IsMember({"materialized", "flash"}))
          ->group(kRunGroup);
    case ConfigOption::kDtype:
      return app.add_option("--dtype", o.dtype, "weights and activations dtype")
          ->capture_default_str()
          ->check(CLI::IsMember({"bf16", "fp16", "fp32", "fp8"}))
          ->group(kRunGroup);
    case ConfigOption::kGradDtype:
      return app.add_option("--grad-dtype", o.grad_dtype, "gradient dtype (default: bf16; fp32 when --dtype fp32)")
          ->check(CLI::IsMember({"bf16", "fp16", "fp32"}))
          ->group(kRunGroup);
    case ConfigOption::kFp8Recipe:
      return app
          .add_option("--fp8-recipe", o.fp8_recipe,
                      "with --dtype fp8: delayed (TransformerEngine's DelayedScaling: per-tensor scales, amax "
                      "history) or blockwise (Float8BlockScaling, DeepSeek-V3's: 1x128 activation tiles, 128x128 "
                      "weight blocks)")
          ->capture_default_str()
          ->check(CLI::IsMember({"delayed", "blockwise"}))
          ->group(kRunGroup);
    case ConfigOption::kDropout:
      return finite_in(app.add_option("--dropout", o.dropout, "dropout probability (default 0.1 for gpt, 0 for llama)"),
                       0.0, 0.99)
          ->group(kRunGroup);
    case ConfigOption::kCapacityFactor:  // C = ⌈c·N·k/E⌉ slots per expert, choices past it dropped
      return finite_in(
                 app.add_option("--capacity-factor", o.capacity_factor, "MoE capacity factor (default: the model's)"),
                 0.0, 1e6)
          ->group(kRunGroup);
    case ConfigOption::kSeed:
      return app.add_option("--seed", o.run.seed, "seed of the data and the dropout RNG")
          ->capture_default_str()
          // CLI11 would wrap -5 into 2^64 - 5.
          ->check(CLI::Validator(
              [](std::string& text) {
                return !text.empty() && text.front() == '-' ? std::string("a seed is a non-negative integer")
                                                            : std::string();
              },
              "UINT"))
          ->group(kRunGroup);
    default: return nullptr;
  }
}

// The communication and overlap options (measured runs and the predicted step).
CLI::Option* add_comm_overlap(CLI::App& app, ConfigOptions& o, ConfigOption which) {
  switch (which) {
    case ConfigOption::kBucketMb:
      return finite_in(app.add_option("--bucket-mb", o.run.bucket_mb, "DP gradient bucket size (MiB)"), 0.001, 1e6)
          ->capture_default_str()
          ->group(kRunGroup);
    case ConfigOption::kOverlapGradReduce:
      return app
          .add_flag("--overlap-grad-reduce,!--no-overlap-grad-reduce", o.run.overlap_grad_reduce,
                    "DP: reduce gradient buckets during the backward (ZeRO 0 all-reduce, ZeRO 1 reduce-scatter; two "
                    "staging slots; default on)")
          ->group(kRunGroup);
    case ConfigOption::kTpCommOverlap:
      return app
          .add_flag("--tp-comm-overlap", o.run.tp_comm_overlap,
                    "predicted step: TP all-gathers and reduce-scatters overlapped with their GEMMs, as Megatron's "
                    "--tp-comm-overlap (needs --sp when --tp > 1)")
          ->group(kRunGroup);
    case ConfigOption::kContiguousGradBuffer:
      return app
          .add_flag("--contiguous-grad-buffer", o.run.contiguous_grad_buffer,
                    "predicted step: DP gradient buckets reduced in place in one buffer, as Megatron's "
                    "DistributedDataParallel (no bucket waits for a staging slot)")
          ->group(kRunGroup);
    case ConfigOption::kPrefetch:
      return app.add_option("--prefetch", o.run.prefetch, "ZeRO-3: units gathered ahead")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{0}, int64_t{1024}))
          ->group(kRunGroup);
    default: return nullptr;
  }
}

// The optimizer's options and the device's.
CLI::Option* add_optimizer_or_device(CLI::App& app, ConfigOptions& o, ConfigOption which) {
  switch (which) {
    case ConfigOption::kOptimizer:
      return app.add_option("--optimizer", o.optimizer, "update rule (fp32 states: adamw 2, sgd 1, adagrad 1, lion 1)")
          ->capture_default_str()
          ->check(CLI::IsMember({"adamw", "sgd", "adagrad", "lion"}))
          ->group(kRunGroup);
    case ConfigOption::kMomentum:
      // 0 keeps no momentum buffer (torch.optim.SGD), so it changes the
      // optimizer state bytes: an option of plan too.
      return finite_in(app.add_option("--momentum", o.run.momentum, "SGD momentum (0: plain SGD, no buffer)"), 0.0, 1.0)
          ->capture_default_str()
          ->group(kRunGroup);
    case ConfigOption::kOffload:
      // DeepSpeed's zero_optimization.offload_optimizer (ZeRO-Offload, Ren et al. 2021).
      return app
          .add_option("--offload", o.offload,
                      "none | optimizer (fp32 master and optimizer state in host memory, the update on the CPU; "
                      "ZeRO 1-3)")
          ->capture_default_str()
          ->check(CLI::IsMember({"none", "optimizer"}))
          ->group(kRunGroup);
    case ConfigOption::kDevice:
      return app.add_option("--device", o.device, "device preset (gpuledger devices)")->group(kDeviceGroup);
    case ConfigOption::kDeviceMemory:
      return app.add_option("--device-memory", o.device_memory, "device memory in bytes (K/M/G/T, Ki/Mi/Gi/Ti)")
          ->group(kDeviceGroup);
    default: return nullptr;
  }
}

CLI::Option* add_one(CLI::App& app, ConfigOptions& o, ConfigOption which) {
  if (CLI::Option* opt = add_model_or_layout(app, o, which)) return opt;
  if (CLI::Option* opt = add_run(app, o, which)) return opt;
  if (CLI::Option* opt = add_comm_overlap(app, o, which)) return opt;
  return add_optimizer_or_device(app, o, which);
}

}  // namespace

void add_config_options(CLI::App& app, ConfigOptions& o, std::initializer_list<ConfigOption> which) {
  constexpr int kLast = static_cast<int>(ConfigOption::kDeviceMemory);
  CLI::Option* added[kLast + 1] = {};
  for (int i = 0; i <= kLast; ++i) {
    const auto option = static_cast<ConfigOption>(i);
    if (std::find(which.begin(), which.end(), option) != which.end()) added[i] = add_one(app, o, option);
  }
  // Pairs that say the same thing two ways.
  auto exclusive = [&](ConfigOption a, ConfigOption b) {
    if (added[static_cast<int>(a)] && added[static_cast<int>(b)])
      added[static_cast<int>(a)]->excludes(added[static_cast<int>(b)]);
  };
  exclusive(ConfigOption::kMicrobatches, ConfigOption::kGbs);
  exclusive(ConfigOption::kDeviceMemory, ConfigOption::kDevice);
}

void add_output_options(CLI::App& app, OutputOptions& o) {
  app.add_option("--json", o.json_path, "write the report to PATH ('-' = stdout; the table then goes to stderr)")
      ->check(CLI::Validator(
          [](std::string& path) {
            // Checked before the run starts, so an unwritable place is not found after it.
            const std::string problem = report::report_destination_problem(path);
            return problem.empty() ? problem : "cannot write the report there: " + problem;
          },
          "PATH"))
      ->group("Output");
  app.add_flag("--quiet", o.quiet, "no table")->group("Output");
}

std::ostream& table_stream(const OutputOptions& o) {
  return report::is_stdout_path(o.json_path) ? std::cerr : std::cout;
}

ResolvedConfig resolve_config(const ConfigOptions& o, const ModelConfig* model) {
  ResolvedConfig r;
  r.model = model ? *model : load_model(o.model);
  if (o.layers > 0) r.model = with_layers(r.model, o.layers);
  if (o.capacity_factor) override_capacity_factor(r.model, *o.capacity_factor);  // checked as the file's field
  r.layout = o.layout;
  r.run = o.run;
  r.run.schedule = *schedule_from_name(o.schedule);
  r.run.recompute = *recompute_from_name(o.recompute);
  r.run.attention = *attention_from_name(o.attention);
  resolve_dtype(o, r);
  r.run.optimizer = *optimizer_from_name(o.optimizer);
  r.run.offload_optimizer = o.offload == "optimizer";
  if (!o.grad_dtype.empty())
    r.run.grad_dtype = *dtype_from_name(o.grad_dtype);
  else
    r.run.grad_dtype = r.run.dtype == DType::kFP32 ? DType::kFP32 : DType::kBF16;
  if (r.run.dtype == DType::kFP32 && r.run.grad_dtype != DType::kFP32)
    throw LayoutError("--grad-dtype " + o.grad_dtype + " with --dtype fp32: fp32 training keeps fp32 gradients");
  // Megatron refuses the flag without sequence parallelism (megatron/training/arguments.py, tag core_r0.8.0).
  if (r.run.tp_comm_overlap && r.layout.tp > 1 && !r.layout.sp)
    throw LayoutError("--tp-comm-overlap needs --sp: the overlapped collectives are sequence parallelism's");
  r.run.dropout = o.dropout.value_or(r.model.is_gpt() ? 0.1 : 0.0);
  require_runnable_model(r.model, r.layout, r.run, o.use);  // MoE: dp and ep only; QK norm: tp 1
  if (o.gbs > 0) {
    const int64_t per_step = r.run.mbs * r.layout.dp;
    if (o.gbs % per_step != 0)
      throw LayoutError("--gbs " + std::to_string(o.gbs) +
                        " is not a multiple of --mbs × --dp = " + std::to_string(per_step));
    r.run.microbatches = o.gbs / per_step;
  }
  validate_layout(r.layout, r.model, r.run);
  resolve_device(o, r);
  require_runnable_fp8(r, o.use);
  return r;
}

void resolve_device(const ConfigOptions& o, ResolvedConfig& r) {
  if (!o.device.empty()) {
    r.device = find_device(o.device);
    if (!r.device) {
      std::string names;
      for (const auto& d : device_presets()) names += (names.empty() ? "" : ", ") + d.name;
      throw ConfigError("device", "unknown device '" + o.device + "' (known: " + names + ")");
    }
    r.device_memory_bytes = r.device->memory_bytes;
  } else if (!o.device_memory.empty()) {
    r.device_memory_bytes = parse_size_option("device-memory", o.device_memory);
  }
}

std::vector<int64_t> select_ranks(const std::string& spec, const Layout& l, int64_t world) {
  if (spec == "roles") return analytic::role_ranks(l);
  std::vector<int64_t> out;
  if (spec == "all") {
    if (world > limits::kMaxListedRanks)
      throw ConfigError("ranks", "--ranks all: world " + std::to_string(world) + " is above the limit of " +
                                     std::to_string(limits::kMaxListedRanks) +
                                     " listed ranks (use roles, or a list like 0,5,9)");
    for (int64_t r = 0; r < world; ++r) out.push_back(r);
    return out;
  }
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (static_cast<int64_t>(out.size()) >= limits::kMaxListedRanks)
      throw ConfigError("ranks", "--ranks: more than " + std::to_string(limits::kMaxListedRanks) + " ranks listed");
    size_t pos = 0;
    int64_t r = -1;
    try {
      r = std::stoll(item, &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    if (pos != item.size() || item.empty() || r < 0 || r >= world)
      throw ConfigError("ranks", "--ranks: '" + item + "' is not a rank in [0, " + std::to_string(world) +
                                     ") (use roles, all, or a list like 0,5,9)");
    out.push_back(r);
  }
  if (out.empty()) throw ConfigError("ranks", "--ranks: empty list");
  return out;
}

}  // namespace gpuledger::cli
