// make_device: the one place that maps a backend name to a Device, and the only
// file that asks whether CUDA was built (as ggml's ggml-backend-reg.cpp does),
// so nothing above the Device ever needs an #if.
#include <memory>
#include <stdexcept>
#include <string>

#include "kernels/cpu/cpu_device.h"
#include "kernels/meta/meta_device.h"
#include "kernels/registry/registry.h"
#if GPULEDGER_HAVE_CUDA
#include "kernels/cuda/make_cuda_device.h"
#endif

namespace gpuledger {

std::unique_ptr<Device> make_device(const std::string& backend, Ledger& ledger, int local_rank) {
  if (backend == "cpu") return std::make_unique<CpuDevice>(ledger);
  if (backend == "meta") return std::make_unique<MetaDevice>(ledger);
  if (backend == "cuda") {
#if GPULEDGER_HAVE_CUDA
    return make_cuda_device(ledger, local_rank);  // throws "cuda: no GPU found (…)" without one
#else
    throw std::invalid_argument("cuda backend not built (configure with CUDA)");
#endif
  }
  throw std::invalid_argument("unknown backend '" + backend + "' (expected cpu, meta or cuda)");
}

}  // namespace gpuledger
