// Safetensors files (the format of Hugging Face checkpoints,
// github.com/huggingface/safetensors, docs "Format"): 8 bytes of little-endian
// header length N, N bytes of JSON header — {"<name>": {"dtype": "F32",
// "shape": [..], "data_offsets": [begin, end]}, …, "__metadata__": {str: str}}
// with offsets relative to the byte after the header — then the data,
// row-major, little-endian.
//
// SafetensorsFile maps the file read-only (mmap) and parses the header; a
// tensor's values are read from the mapping on demand, so a reader touches
// (and the kernel pages in) only the bytes it asks for — the rows of a
// tensor-parallel shard, the units of a pipeline stage. Element types read:
// F32, BF16, F16 (converted to fp32). Anything malformed throws ConfigError
// naming the file and the tensor.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "models/io/mapped_file.h"

namespace gpuledger {

struct SafetensorInfo {
  DType dtype = DType::kFP32;
  std::vector<int64_t> shape;
  int64_t begin_bytes = 0;  // from the start of the data section
  int64_t end_bytes = 0;
  int64_t elems() const;
};

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);  // throws ConfigError
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, SafetensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  const SafetensorInfo& info(const std::string& name) const;  // throws ConfigError

  // n elements of `name` from element `first` (row-major), as fp32.
  void read_fp32(const std::string& name, int64_t first, int64_t n, float* out) const;
  // The whole tensor as fp32.
  std::vector<float> read_all_fp32(const std::string& name) const;
  // The raw bytes of the tensor (its own dtype), for bit-exact comparisons.
  const void* raw(const std::string& name) const;

 private:
  std::string path_;
  MappedFile file_;
  int64_t data_begin_ = 0;  // 8 + header length
  std::map<std::string, SafetensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// One tensor to write: its values in `dtype`'s encoding (data.size() ==
// elems · dtype_bytes).
struct SafetensorOut {
  std::string name;
  DType dtype = DType::kFP32;
  std::vector<int64_t> shape;
  std::vector<char> data;
};
SafetensorOut fp32_tensor(std::string name, std::vector<int64_t> shape, const float* values);

// Writes a safetensors file (tensors sorted by name, as the reference writer
// does; the header padded with spaces to a multiple of 8 bytes so that the
// data is aligned). Throws std::runtime_error on an I/O failure.
void write_safetensors(const std::string& path, const std::vector<SafetensorOut>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace gpuledger
