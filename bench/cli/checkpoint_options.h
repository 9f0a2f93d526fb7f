// The options that bring a user's own weights and tokens, and take the
// weights back out: --init-from, --tokens (train and infer), --save-weights
// (train). Resolution reads config.json and the checkpoint's and token file's
// headers, so that a bad file is a ConfigError (exit 2) before any rank
// starts; the values are read by each rank from its own part of the files
// (models/io/hf_weights.h, token_file.h).
#pragma once
#include <string>

#include "bench/cli/config_options.h"

namespace CLI {
class App;
}

namespace gpuledger::cli {

struct CheckpointOptions {
  std::string init_from;          // a checkpoint folder (config.json + safetensors) or one .safetensors file
  std::string tokens;             // llm.c .bin or NumPy .npy
  std::string save_weights;       // train: a folder for model.safetensors + config.json
  const CLI::App* app = nullptr;  // to tell whether --model was given
};

// `training`: --save-weights too.
void add_checkpoint_options(CLI::App& app, CheckpointOptions& o, bool training);

// resolve_config with the checkpoint's model when --init-from names a folder
// with a config.json (then --model must not be given); checks the checkpoint
// against the model, the token file against --seq and the vocabulary, and
// --save-weights against the layout; sets run.init_from and run.tokens.
// `training`: the token file must serve --seq (infer checks its prompts itself).
ResolvedConfig resolve_with_checkpoint(const ConfigOptions& config, const CheckpointOptions& o,
                                       const std::string& backend, bool training);

}  // namespace gpuledger::cli
