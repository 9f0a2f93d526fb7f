// CommError (see comm_error.h).
#include "comm/comm_error.h"

namespace gpuledger {

CommError::CommError(const std::string& library, const std::string& call, const std::string& library_message,
                     const std::string& context, const char* file, int line)
    : Error(library, call, library_message, context, file, line),
      world_rank_(error_origin().rank),
      host_(error_origin().host),
      call_(call),
      where_(std::string(file) + ":" + std::to_string(line)),
      library_message_(library_message),
      context_(context) {}

}  // namespace gpuledger
