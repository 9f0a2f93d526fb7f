// NCCL_CHECK(call, context): the one-line NCCL check on GPL_COMM_CHECK_GEN
// (comm_error.h), as MPI_CHECK is for MPI. A call that does not return
// ncclSuccess throws CommError carrying the world rank and host
// (error_origin(), set by MpiRuntime), the call as written, file:line, NCCL's
// text for the code (ncclGetErrorString) followed by NCCL's own last message
// (ncclGetLastError, which says which argument or which CUDA call failed;
// "unhandled cuda error" alone does not), and the context: what was being
// done, over which group ("all-reducing 4096 bf16 elements over 'dp'").
// NCCL_CHECK_NOTHROW logs instead, for destructors.
#pragma once
#include <nccl.h>

#include <string>

#include "comm/comm_error.h"

namespace gpuledger::detail {

// e.g. "invalid argument (run with NCCL_DEBUG=WARN for details) (ncclResult_t 4);
// NCCL's last error: Invalid config blocking attribute value -2147483648".
// ncclGetLastError(nullptr): the last error of any communicator of this
// process (the one that failed may not exist yet, e.g. in ncclCommInitRank).
// NCCL never clears it, so after an error NCCL did not describe it can be an
// earlier one's: it is printed as NCCL's last error, not as this call's.
inline std::string nccl_error_string(ncclResult_t code) {
  std::string s =
      std::string(ncclGetErrorString(code)) + " (ncclResult_t " + std::to_string(static_cast<int>(code)) + ")";
  const char* last = ncclGetLastError(nullptr);
  if (last != nullptr && *last != '\0') s += "; NCCL's last error: " + std::string(last);
  return s;
}

}  // namespace gpuledger::detail

#define NCCL_CHECK(call, context) \
  GPL_COMM_CHECK_GEN("NCCL", call, #call, ncclSuccess, ::gpuledger::detail::nccl_error_string, context)

#define NCCL_CHECK_NOTHROW(call, context) \
  GPL_COMM_CHECK_GEN_NOTHROW("NCCL", call, #call, ncclSuccess, ::gpuledger::detail::nccl_error_string, context)
