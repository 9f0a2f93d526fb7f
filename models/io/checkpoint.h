// Checkpoint: the tensors of a Hugging Face checkpoint, wherever they are —
//   a folder with model.safetensors (and config.json),
//   a folder with model.safetensors.index.json ({"weight_map": {tensor: file}})
//     and its shards model-0000N-of-0000M.safetensors,
//   or one .safetensors file.
// A shard is opened (mapped) the first time one of its tensors is asked for,
// so a rank that needs a few layers opens only their shards.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/io/safetensors.h"

namespace gpuledger {

class Checkpoint {
 public:
  // Throws ConfigError when the path holds none of the three forms.
  explicit Checkpoint(const std::string& path);

  const std::string& path() const { return path_; }
  // The folder's config.json ("" when the checkpoint is one file).
  const std::string& config_path() const { return config_path_; }
  bool has(const std::string& name) const { return file_of_.count(name) != 0; }
  std::vector<std::string> names() const;  // sorted
  // The file holding `name` (opened on first use). Throws ConfigError naming the tensor.
  const SafetensorsFile& file(const std::string& name) const;
  const SafetensorInfo& info(const std::string& name) const { return file(name).info(name); }

 private:
  std::string path_, config_path_;
  std::map<std::string, std::string> file_of_;  // tensor -> file path
  mutable std::map<std::string, std::unique_ptr<SafetensorsFile>> open_;
};

}  // namespace gpuledger
