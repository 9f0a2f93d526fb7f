// Checkpoint (see checkpoint.h).
#include "models/io/checkpoint.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/model_config.h"

namespace gpuledger {

namespace fs = std::filesystem;
using nlohmann::json;

Checkpoint::Checkpoint(const std::string& path) : path_(path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    auto file = std::make_unique<SafetensorsFile>(path);
    for (const auto& [name, info] : file->tensors()) file_of_[name] = path;
    open_[path] = std::move(file);
    return;
  }
  if (!fs::is_directory(path, ec))
    throw ConfigError("init_from", path + ": no such checkpoint (a folder or a .safetensors file)");
  const fs::path dir(path);
  if (fs::exists(dir / "config.json")) config_path_ = (dir / "config.json").string();
  const fs::path single = dir / "model.safetensors", index = dir / "model.safetensors.index.json";
  if (fs::exists(single)) {
    auto file = std::make_unique<SafetensorsFile>(single.string());
    for (const auto& [name, info] : file->tensors()) file_of_[name] = single.string();
    open_[single.string()] = std::move(file);
    return;
  }
  if (!fs::exists(index))
    throw ConfigError("init_from", path + ": holds neither model.safetensors nor model.safetensors.index.json");
  std::ifstream in(index);
  std::stringstream text;
  text << in.rdbuf();
  const json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("weight_map") || !j.at("weight_map").is_object())
    throw ConfigError("init_from", index.string() + ": no \"weight_map\" object");
  for (const auto& [name, file] : j.at("weight_map").items()) {
    if (!file.is_string())
      throw ConfigError("init_from", index.string() + ": the file of " + name + " is not a string");
    file_of_[name] = (dir / file.get<std::string>()).string();
  }
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  for (const auto& [name, file] : file_of_) out.push_back(name);
  return out;
}

const SafetensorsFile& Checkpoint::file(const std::string& name) const {
  const auto it = file_of_.find(name);
  if (it == file_of_.end()) throw ConfigError("init_from", path_ + ": the checkpoint has no tensor " + name);
  auto& slot = open_[it->second];
  if (!slot) slot = std::make_unique<SafetensorsFile>(it->second);
  if (!slot->has(name))
    throw ConfigError("init_from", it->second + ": the index places " + name + " here, but the file lacks it");
  return *slot;
}

}  // namespace gpuledger
