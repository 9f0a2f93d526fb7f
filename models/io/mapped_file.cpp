// MappedFile (see mapped_file.h).
#include "models/io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/model_config.h"

namespace gpuledger {

MappedFile::MappedFile(const std::string& path, const std::string& field) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw ConfigError(field, path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw ConfigError(field, path + ": not a regular file");
  }
  size_bytes_ = static_cast<int64_t>(st.st_size);
  if (size_bytes_ > 0) {
    map_ = ::mmap(nullptr, static_cast<size_t>(size_bytes_), PROT_READ, MAP_PRIVATE, fd, 0);
    if (map_ == MAP_FAILED) {
      const int err = errno;
      map_ = nullptr;
      ::close(fd);
      throw ConfigError(field, path + ": cannot mmap: " + std::strerror(err));
    }
  }
  ::close(fd);  // the mapping stays valid
}

MappedFile::~MappedFile() {
  if (map_ != nullptr) ::munmap(map_, static_cast<size_t>(size_bytes_));
}

}  // namespace gpuledger
