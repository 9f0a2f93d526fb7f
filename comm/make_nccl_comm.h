// The NCCL comm's factory, declared without any CUDA or NCCL header so that
// plain C++ (parallel/groups.cpp) can call it. Defined in nccl_comm.cpp, which
// is built only with CUDA and NCCL (GPULEDGER_HAVE_NCCL).
#pragma once
#include <memory>

#include "comm/comm.h"
#include "comm/mpi_comm.h"

namespace gpuledger {

class Device;

// An NcclComm over `mpi`'s group (collective over it), on `device`, which must
// be the CUDA backend's (throws std::invalid_argument naming the backend
// otherwise).
std::unique_ptr<Comm> make_nccl_comm(std::unique_ptr<MpiComm> mpi, CommCounters& counters, Device& device);

}  // namespace gpuledger
