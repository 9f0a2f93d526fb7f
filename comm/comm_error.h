// CommError: a failed communication call (MPI, NCCL), a gpuledger::Error
// (core/check.h: same message format, rank and host from error_origin(),
// which MpiRuntime sets to the world rank) that also keeps each field apart,
// so the harness can put them in a failed-point report: world rank, host, the
// call as written, file:line, the library's message and the "while …" context.
//
// GPL_COMM_CHECK_GEN is check.h's GPL_CHECK_GEN body throwing CommError; the
// one-line MPI_CHECK (mpi_check.h) and NCCL_CHECK wrap it. Unlike
// GPL_CHECK_GEN it takes the call's text from the wrapper, which stringifies
// its own argument: an argument passed on to another macro arrives
// macro-expanded, and MPI_COMM_WORLD would print as Open MPI's internals.
#pragma once
#include <cstdint>
#include <string>

#include "core/check.h"

namespace gpuledger {

class CommError : public Error {
 public:
  CommError(const std::string& library, const std::string& call, const std::string& library_message,
            const std::string& context, const char* file, int line);

  int64_t world_rank() const { return world_rank_; }  // error_origin().rank
  const std::string& host() const { return host_; }
  const std::string& call() const { return call_; }    // the call as written
  const std::string& where() const { return where_; }  // "file:line"
  const std::string& library_message() const { return library_message_; }
  const std::string& context() const { return context_; }  // what the code was doing

 private:
  int64_t world_rank_;
  std::string host_, call_, where_, library_message_, context_;
};

}  // namespace gpuledger

// `context`: anything a std::string converts from, saying what the call was
// for ("sending 4096 bf16 elements to peer 1 over 'pp'"); printed after "while".
#define GPL_COMM_CHECK_GEN(library, expr, expr_text, ok_value, to_string_fn, context)                             \
  do {                                                                                                            \
    const auto gpl_status_ = (expr);                                                                              \
    if (gpl_status_ != (ok_value))                                                                                \
      throw ::gpuledger::CommError(library, expr_text, to_string_fn(gpl_status_), (context), __FILE__, __LINE__); \
  } while (0)

// Logs instead of throwing: for destructors.
#define GPL_COMM_CHECK_GEN_NOTHROW(library, expr, expr_text, ok_value, to_string_fn, context)                       \
  do {                                                                                                              \
    const auto gpl_status_ = (expr);                                                                                \
    if (gpl_status_ != (ok_value))                                                                                  \
      ::gpuledger::log_error_nothrow(                                                                               \
          ::gpuledger::format_error(library, expr_text, to_string_fn(gpl_status_), (context), __FILE__, __LINE__)); \
  } while (0)
