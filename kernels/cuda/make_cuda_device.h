// The CUDA backend's factory, declared without any CUDA header so that
// kernels/registry.cpp (plain C++) can call it. Defined in cuda_device.cu.
#pragma once
#include <memory>

#include "kernels/device.h"

namespace gpuledger {

// A CudaDevice on GPU local_rank % (number of GPUs). Throws
// std::invalid_argument("cuda: no GPU found (cudaGetDeviceCount: …)") when the
// runtime reports no device or an error (no driver, no GPU): any error counts
// as zero devices.
std::unique_ptr<Device> make_cuda_device(Ledger& ledger, int local_rank);

// The cudaStream_t `device` runs its ops on, as void* so that this header needs
// no CUDA header, or nullptr when `device` is not a CudaDevice (e.g. one
// wrapped in a ProfilingDevice). For the NCCL comm (comm/nccl_comm.cpp).
void* cuda_device_stream(Device& device);

}  // namespace gpuledger
