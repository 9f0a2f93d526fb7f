// Error formatting for the check macros (see check.h).
#include "core/check.h"

#include <unistd.h>

#include <cstdio>

namespace gpuledger {

ErrorOrigin& error_origin() {
  static ErrorOrigin origin = [] {
    ErrorOrigin o;
    char buf[256] = {0};
    if (gethostname(buf, sizeof(buf) - 1) == 0) o.host = buf;
    return o;
  }();
  return origin;
}

std::string format_error(const std::string& library, const std::string& call, const std::string& message,
                         const std::string& context, const char* file, int line) {
  std::ostringstream os;
  os << "rank " << error_origin().rank << " on " << error_origin().host << ": " << library << " error";
  if (!context.empty()) os << " while " << context;
  os << ": " << message << " [" << call << " at " << file << ":" << line << "]";
  return os.str();
}

Error::Error(const std::string& library, const std::string& call, const std::string& message,
             const std::string& context, const char* file, int line)
    : std::runtime_error(format_error(library, call, message, context, file, line)), library_(library) {}

void log_error_nothrow(const std::string& message) noexcept {
  std::fprintf(stderr, "gpuledger: %s\n", message.c_str());
}

}  // namespace gpuledger
