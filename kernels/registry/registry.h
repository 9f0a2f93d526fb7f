// make_device: the one place that maps a backend name to a Device
// (kernels/registry/registry.cpp, the only file with #if GPULEDGER_HAVE_CUDA).
// Its own library, gpl_registry, so that the backends depend on the Device
// interface and the registry on the backends, never the other way round.
#pragma once
#include <memory>
#include <string>

#include "kernels/device.h"

namespace gpuledger {

// "cpu" | "meta" | "cuda". Throws std::invalid_argument for an unknown or
// unavailable backend, saying why (e.g. "cuda: not built" or "no GPU found").
std::unique_ptr<Device> make_device(const std::string& backend, Ledger& ledger, int local_rank = 0);

}  // namespace gpuledger
