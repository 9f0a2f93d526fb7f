// MappedFile: a file mapped read-only (mmap), for the checkpoint and token
// readers: their callers touch only the bytes they read, and the kernel pages
// in only those.
#pragma once
#include <cstdint>
#include <string>

namespace gpuledger {

class MappedFile {
 public:
  // Throws ConfigError(field, "<path>: cannot open: …") when the file cannot be mapped.
  MappedFile(const std::string& path, const std::string& field);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const char* data() const { return static_cast<const char*>(map_); }
  int64_t size_bytes() const { return size_bytes_; }

 private:
  void* map_ = nullptr;
  int64_t size_bytes_ = 0;
};

}  // namespace gpuledger
