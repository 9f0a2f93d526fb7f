// --init-from, --tokens, --save-weights (see checkpoint_options.h).
#include "bench/cli/checkpoint_options.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <optional>

#include "bench/cli/fp8_options.h"
#include "core/model_support.h"
#include "models/io/hf_config.h"
#include "models/io/hf_weights.h"
#include "models/io/token_file.h"

namespace gpuledger::cli {

void add_checkpoint_options(CLI::App& app, CheckpointOptions& o, bool training) {
  const char* g = "Weights and tokens";
  o.app = &app;
  app.add_option("--init-from", o.init_from,
                 "start from a Hugging Face checkpoint: a folder (config.json + model.safetensors, or a sharded "
                 "index) or one .safetensors file with --model (GPT-2, Llama, Mistral, Qwen2)")
      ->group(g);
  app.add_option("--tokens", o.tokens,
                 training ? "training tokens: llm.c's .bin or a NumPy .npy (int32/int64/uint16, 1-D or [n, seq + 1])"
                          : "prompts: llm.c's .bin or a NumPy .npy; sequence i is prompt i")
      ->group(g);
  if (training)
    app.add_option("--save-weights", o.save_weights,
                   "after the last step, write FOLDER/model.safetensors + config.json (transformers loads them)")
        ->group(g);
}

ResolvedConfig resolve_with_checkpoint(const ConfigOptions& config, const CheckpointOptions& o,
                                       const std::string& backend, bool training) {
  std::optional<ModelConfig> from_file;
  if (!o.init_from.empty()) {
    const Checkpoint probe(o.init_from);
    if (!probe.config_path().empty()) {
      if (o.app != nullptr && o.app->count("--model") > 0)
        throw ConfigError("model",
                          "--init-from " + o.init_from + " takes the model from its config.json: leave --model out");
      from_file = load_hf_config(probe.config_path());
    } else if (o.app != nullptr && o.app->count("--model") == 0) {
      throw ConfigError("model", "--init-from " + o.init_from + " has no config.json: name the model with --model");
    }
  }
  ConfigOptions c = config;
  // infer has no --seq: the training default (1024) must not exceed a small checkpoint's learned positions.
  if (!training && from_file) c.run.seq = std::min(c.run.seq, from_file->max_seq);
  ResolvedConfig r = resolve_config(c, from_file ? &*from_file : nullptr);
  require_fp8_backend(r.run, backend, training);
  if (!o.init_from.empty()) {
    CheckpointWeights(o.init_from, r.model).validate();
    r.run.init_from = o.init_from;
  }
  if (!o.tokens.empty()) {
    if (training) TokenFile(o.tokens).check_for(r.run.seq, r.model.vocab);  // infer checks its prompts
    r.run.tokens = o.tokens;
  }
  if (!o.save_weights.empty()) {
    if (backend == "meta") throw ConfigError("save-weights", "--save-weights needs weights: not with --backend meta");
    if (r.layout.tp > 1 || r.layout.pp > 1 || r.layout.ep > 1 || (r.layout.zero >= 3 && r.layout.dp > 1))
      throw ConfigError("save-weights",
                        "--save-weights writes rank 0's parameters: it needs tp = pp = ep = 1 and no ZeRO 3 sharding");
    hf_config_json(r.model);  // a model whose Hugging Face config is not written (MoE, MLA, …): refused before the run
  }
  return r;
}

}  // namespace gpuledger::cli
