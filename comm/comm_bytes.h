// The bytes one Comm call books, as nccl-tests sizes it (doc/PERFORMANCE.md;
// docs/architecture.md "Reports"): all-reduce and broadcast the buffer (n elements),
// reduce-scatter its input and all-gather its output (n · group size elements,
// n being the per-rank count the Comm interface takes), all-to-all its send
// buffer (n elements to each of the group's ranks, itself included: n · group
// size, as nccl-tests' alltoall sizes it, src/alltoall.cu AlltoAllGetCollByteCount),
// send/recv the message.
// One definition shared by every backend (MpiComm, SimComm, NCCL), so the
// real and the simulated comms cannot drift apart.
#pragma once
#include <cstdint>

#include "comm/comm.h"
#include "core/dtype.h"

namespace gpuledger {

constexpr int64_t comm_call_bytes(CommKind kind, int64_t n, DType t, int64_t group_size) {
  switch (kind) {
    case CommKind::kReduceScatter:
    case CommKind::kAllGather:
    case CommKind::kAllToAll: return n * group_size * dtype_bytes(t);
    case CommKind::kAllReduce:
    case CommKind::kBroadcast:
    case CommKind::kSend:
    case CommKind::kRecv:
    case CommKind::kCopyToHost:
    case CommKind::kCopyToDevice: return n * dtype_bytes(t);
  }
  return 0;
}

}  // namespace gpuledger
