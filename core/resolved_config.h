// A run's configuration once every option is resolved: the model (preset or
// file, --layers applied), the layout, the run settings with their defaults
// filled in (microbatches from --gbs, dropout and gradient dtype by model and
// dtype), and the device when one was named (a preset, or only its memory).
// What every subcommand's request starts from and what the report's "config"
// section shows.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "core/device_spec.h"
#include "core/layout.h"
#include "core/model_config.h"
#include "core/run_config.h"

namespace gpuledger {

struct ResolvedConfig {
  ModelConfig model;
  Layout layout;
  RunConfig run;
  std::optional<DeviceSpec> device;            // a preset (--device)
  std::optional<int64_t> device_memory_bytes;  // the preset's memory, or --device-memory alone

  // The report's env.device of the analytic subcommands: the preset's name,
  // "custom" for a memory size alone, "none" without either.
  std::string device_label() const { return device ? device->name : (device_memory_bytes ? "custom" : "none"); }
};

}  // namespace gpuledger
