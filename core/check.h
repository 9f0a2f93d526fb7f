// One error type and one check body for every library call (docs/architecture.md "Errors"):
// GPL_CHECK_GEN(expr, ok_value, to_string_fn, context) throws gpuledger::Error
// carrying the rank, the host, the stringified call, file:line, the library's
// message and a "while …" context. CUDA_CHECK, CUBLAS_CHECK, NCCL_CHECK and
// MPI_CHECK are one-line wrappers defined next to their backends. The
// _NOTHROW variant logs to stderr instead (for destructors).
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace gpuledger {

// The rank and host reported in errors; set once by the runtime (MPI or not).
struct ErrorOrigin {
  int rank = 0;
  std::string host;
};
ErrorOrigin& error_origin();

class Error : public std::runtime_error {
 public:
  Error(const std::string& library, const std::string& call, const std::string& message, const std::string& context,
        const char* file, int line);
  const std::string& library() const { return library_; }

 private:
  std::string library_;
};

std::string format_error(const std::string& library, const std::string& call, const std::string& message,
                         const std::string& context, const char* file, int line);

}  // namespace gpuledger

#define GPL_CHECK_GEN(library, expr, ok_value, to_string_fn, context)                                     \
  do {                                                                                                    \
    const auto gpl_status_ = (expr);                                                                      \
    if (gpl_status_ != (ok_value))                                                                        \
      throw ::gpuledger::Error(library, #expr, to_string_fn(gpl_status_), (context), __FILE__, __LINE__); \
  } while (0)

#define GPL_CHECK_GEN_NOTHROW(library, expr, ok_value, to_string_fn, context)                                   \
  do {                                                                                                          \
    const auto gpl_status_ = (expr);                                                                            \
    if (gpl_status_ != (ok_value))                                                                              \
      ::gpuledger::log_error_nothrow(                                                                           \
          ::gpuledger::format_error(library, #expr, to_string_fn(gpl_status_), (context), __FILE__, __LINE__)); \
  } while (0)

namespace gpuledger {
void log_error_nothrow(const std::string& message) noexcept;
}
