// Inputs wrong in themselves (see input_checks.h).
#include "bench/cli/input_checks.h"

#include "core/model_config.h"
#include "models/io/checkpoint.h"
#include "models/io/hf_config.h"
#include "models/io/token_file.h"
#include "models/transformer/request_trace.h"

namespace gpuledger::cli {

void check_config_inputs(const ConfigOptions& o) {
  load_model(o.model);
  ResolvedConfig device_only;
  resolve_device(o, device_only);
}

void check_size_input(const std::string& option, const std::string& text) { parse_size_option(option, text); }

void check_trace_input(const std::string& path) {
  if (!path.empty()) read_trace(path);
}

void check_checkpoint_inputs(const CheckpointOptions& o) {
  if (!o.init_from.empty()) {
    const Checkpoint probe(o.init_from);
    if (!probe.config_path().empty()) load_hf_config(probe.config_path());
  }
  if (!o.tokens.empty()) TokenFile{o.tokens};
}

}  // namespace gpuledger::cli
