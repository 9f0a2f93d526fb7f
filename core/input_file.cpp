// Reading user-named files with checks first (see input_file.h).
#include "core/input_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "core/model_config.h"

namespace gpuledger {

void check_printable_name(std::string_view field, const std::string& name) {
  for (const char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "0x%02x", u);
      throw ConfigError(std::string(field), std::string(field) + ": the name holds a control character (byte " + hex +
                                                "); names are printed, so they may hold none");
    }
  }
}

std::string read_input_file(const std::string& path, int64_t max_bytes, std::string_view what) {
  const std::string w(what);
  check_printable_name(w, path);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw ConfigError(w, w + " '" + path + "': cannot open: " + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) throw ConfigError(w, w + " '" + path + "' is a directory");
  if (!S_ISREG(st.st_mode))
    throw ConfigError(w, w + " '" + path + "' is not a regular file (a device, FIFO or socket is not read)");
  if (st.st_size > max_bytes)
    throw ConfigError(w, w + " '" + path + "' is " + std::to_string(st.st_size) + " bytes, above the limit of " +
                             std::to_string(max_bytes));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(w, w + " '" + path + "': cannot open: " + std::strerror(errno));
  std::string text;
  text.resize(static_cast<size_t>(st.st_size));
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  // The file may have shrunk or grown since stat: keep what was read, never more than the cap.
  text.resize(static_cast<size_t>(in.gcount()));
  if (in.bad()) throw ConfigError(w, w + " '" + path + "': read error");
  return text;
}

}  // namespace gpuledger
