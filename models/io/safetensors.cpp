// SafetensorsFile and write_safetensors (see safetensors.h).
#include "models/io/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/model_config.h"

namespace gpuledger {

using nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw ConfigError("safetensors", path + ": not a valid safetensors file: " + what);
}

DType dtype_from_safetensors(const std::string& s, const std::string& path, const std::string& name) {
  if (s == "F32") return DType::kFP32;
  if (s == "BF16") return DType::kBF16;
  if (s == "F16") return DType::kFP16;
  throw ConfigError("safetensors",
                    path + ": tensor " + name + " has dtype " + s + "; gpuledger reads F32, BF16 and F16");
}

const char* safetensors_dtype(DType t) {
  switch (t) {
    case DType::kFP32: return "F32";
    case DType::kBF16: return "BF16";
    case DType::kFP16: return "F16";
  }
  return "F32";
}

SafetensorInfo parse_entry(const json& e, const std::string& path, const std::string& name, int64_t data_bytes) {
  if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
    bad(path, "tensor " + name + " needs dtype, shape and data_offsets");
  const json &shape = e.at("shape"), &off = e.at("data_offsets");
  if (!e.at("dtype").is_string() || !shape.is_array() || !off.is_array() || off.size() != 2)
    bad(path, "tensor " + name + ": malformed dtype, shape or data_offsets");
  SafetensorInfo t;
  t.dtype = dtype_from_safetensors(e.at("dtype").get<std::string>(), path, name);
  for (const json& d : shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      bad(path, "tensor " + name + ": a negative or non-integer dimension");
    t.shape.push_back(d.get<int64_t>());
  }
  if (!off[0].is_number_integer() || !off[1].is_number_integer())
    bad(path, "tensor " + name + ": offsets not integers");
  t.begin_bytes = off[0].get<int64_t>();
  t.end_bytes = off[1].get<int64_t>();
  if (t.begin_bytes < 0 || t.end_bytes < t.begin_bytes || t.end_bytes > data_bytes)
    bad(path, "tensor " + name + ": data_offsets outside the file");
  if (t.end_bytes - t.begin_bytes != t.elems() * dtype_bytes(t.dtype))
    bad(path, "tensor " + name + ": data_offsets span " + std::to_string(t.end_bytes - t.begin_bytes) +
                  " bytes, its shape and dtype need " + std::to_string(t.elems() * dtype_bytes(t.dtype)));
  return t;
}

}  // namespace

int64_t SafetensorInfo::elems() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path), file_(path, "safetensors") {
  const int64_t size = file_.size_bytes();
  if (size < 8) bad(path, "shorter than its 8-byte header length");
  uint64_t header_len = 0;
  std::memcpy(&header_len, file_.data(), 8);  // little-endian, as every host we build for
  if (header_len > static_cast<uint64_t>(size - 8)) bad(path, "header length past the end of the file");
  data_begin_ = 8 + static_cast<int64_t>(header_len);
  const json h = json::parse(file_.data() + 8, file_.data() + data_begin_, nullptr, /*allow_exceptions=*/false);
  if (!h.is_object()) bad(path, "the header is not a JSON object");
  for (const auto& [name, e] : h.items()) {
    if (name == "__metadata__") {
      if (!e.is_object()) bad(path, "__metadata__ is not an object");
      for (const auto& [k, v] : e.items())
        if (v.is_string()) metadata_[k] = v.get<std::string>();
      continue;
    }
    tensors_[name] = parse_entry(e, path, name, size - data_begin_);
  }
}

SafetensorsFile::~SafetensorsFile() = default;

const SafetensorInfo& SafetensorsFile::info(const std::string& name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) throw ConfigError("safetensors", path_ + ": no tensor named " + name);
  return it->second;
}

const void* SafetensorsFile::raw(const std::string& name) const {
  return file_.data() + data_begin_ + info(name).begin_bytes;
}

void SafetensorsFile::read_fp32(const std::string& name, int64_t first, int64_t n, float* out) const {
  const SafetensorInfo& t = info(name);
  if (first < 0 || n < 0 || first + n > t.elems())
    throw std::out_of_range(path_ + ": elements [" + std::to_string(first) + ", " + std::to_string(first + n) +
                            ") of " + name + " (" + std::to_string(t.elems()) + " elements)");
  convert_to_fp32(static_cast<const char*>(raw(name)) + first * dtype_bytes(t.dtype), t.dtype, out, n);
}

std::vector<float> SafetensorsFile::read_all_fp32(const std::string& name) const {
  std::vector<float> v(static_cast<size_t>(info(name).elems()));
  read_fp32(name, 0, static_cast<int64_t>(v.size()), v.data());
  return v;
}

SafetensorOut fp32_tensor(std::string name, std::vector<int64_t> shape, const float* values) {
  SafetensorOut t{std::move(name), DType::kFP32, std::move(shape), {}};
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  t.data.resize(static_cast<size_t>(4 * n));
  std::memcpy(t.data.data(), values, t.data.size());
  return t;
}

void write_safetensors(const std::string& path, const std::vector<SafetensorOut>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<const SafetensorOut*> order;
  for (const auto& t : tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->name < b->name; });
  json h = json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  int64_t offset = 0;
  for (const SafetensorOut* t : order) {
    int64_t n = 1;
    for (int64_t d : t->shape) n *= d;
    if (static_cast<int64_t>(t->data.size()) != n * dtype_bytes(t->dtype))
      throw std::invalid_argument("write_safetensors: " + t->name + " holds " + std::to_string(t->data.size()) +
                                  " bytes, its shape needs " + std::to_string(n * dtype_bytes(t->dtype)));
    const int64_t end = offset + static_cast<int64_t>(t->data.size());
    h[t->name] = {{"dtype", safetensors_dtype(t->dtype)}, {"shape", t->shape}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string header = h.dump();
  header.append((8 - header.size() % 8) % 8, ' ');
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
  const uint64_t len = header.size();
  f.write(reinterpret_cast<const char*>(&len), 8);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  for (const SafetensorOut* t : order) f.write(t->data.data(), static_cast<std::streamsize>(t->data.size()));
  if (!f.flush()) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
}

}  // namespace gpuledger
