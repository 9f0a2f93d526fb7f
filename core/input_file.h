// Reading a file the user named (a model file, a trace, a report): the name
// may not hold control characters (it is printed in messages and tables), the
// path must be a regular file — stat first, so that a directory, a FIFO or a
// device such as /dev/zero is refused before anything is read — and its size
// must be within a stated cap (core/limits.h). Throws ConfigError (exit 2)
// whose message names the path and says what is wrong: "is a directory",
// "not a regular file", "is N bytes, above the limit of M", "cannot open".
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace gpuledger {

// Throws ConfigError(field) when `name` holds a control character (below 0x20, or 0x7f).
void check_printable_name(std::string_view field, const std::string& name);

// The whole content of the regular file `path`, at most `max_bytes` long.
// `what` names the file's role in messages ("model file", "trace", "report").
std::string read_input_file(const std::string& path, int64_t max_bytes, std::string_view what);

}  // namespace gpuledger
