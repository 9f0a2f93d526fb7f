// MPI_CHECK(call, context): the one-line MPI check on GPL_COMM_CHECK_GEN
// (comm_error.h, check.h's body). A call that does not return MPI_SUCCESS
// throws CommError with the world rank, host, the call as written, file:line,
// MPI's error string and the context ("while …"). MPI_CHECK_NOTHROW logs
// instead, for destructors.
//
// MPI reports errors through return codes only where the communicator's error
// handler is MPI_ERRORS_RETURN; MpiRuntime sets it on MPI_COMM_WORLD (and
// communicators split from it inherit it). Under the default
// MPI_ERRORS_ARE_FATAL the job aborts inside the call and no check runs.
#pragma once
#include <mpi.h>

#include <string>

#include "comm/comm_error.h"

namespace gpuledger::detail {

// MPI's text for an error code, e.g. "MPI_ERR_RANK: invalid rank (code 6)".
inline std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error code " + std::to_string(code);
  return std::string(text, static_cast<size_t>(len)) + " (code " + std::to_string(code) + ")";
}

}  // namespace gpuledger::detail

#define MPI_CHECK(call, context) \
  GPL_COMM_CHECK_GEN("MPI", call, #call, MPI_SUCCESS, ::gpuledger::detail::mpi_error_string, context)

#define MPI_CHECK_NOTHROW(call, context) \
  GPL_COMM_CHECK_GEN_NOTHROW("MPI", call, #call, MPI_SUCCESS, ::gpuledger::detail::mpi_error_string, context)
