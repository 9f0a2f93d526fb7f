// The checks of inputs that are wrong in themselves, whatever the other
// options say: the model (an unknown preset, an unreadable or malformed model
// file), the device, a size, a file the subcommand reads. Each run command's
// check_inputs() (commands.h) is made of them. A sweep runs them on every
// point before any point runs (bench/cli/sweep_plan.h): a point that fails
// them is a usage error (exit 2), where a combination the subcommand refuses
// (a layout that does not divide) only skips the point. Not here: those
// refusals (RunCommand::validate) and the checks CLI11 makes of one value
// (ranges, names of enums), which fail when a point's values are set.
#pragma once
#include <string>

#include "bench/cli/checkpoint_options.h"
#include "bench/cli/config_options.h"

namespace gpuledger::cli {

// --model (loaded and parsed as a run loads it), --device, --device-memory.
// Throws ConfigError.
void check_config_inputs(const ConfigOptions& o);
// A size option (K/M/G/Ki/Mi/Gi); `option` without the dashes. Throws ConfigError naming it.
void check_size_input(const std::string& option, const std::string& text);
// A JSONL request trace (--trace), read and parsed whole; nothing when `path` is empty. Throws ConfigError.
void check_trace_input(const std::string& path);
// --init-from (the checkpoint's files and its config.json) and --tokens (the
// token file's header). Throws ConfigError.
void check_checkpoint_inputs(const CheckpointOptions& o);

}  // namespace gpuledger::cli
