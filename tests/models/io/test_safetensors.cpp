// Safetensors files, checkpoints and the Hugging Face names (models/io):
//   - what write_safetensors writes, SafetensorsFile reads back bit-exact
//     (F32, BF16, F16; metadata), and converts to fp32 as core/dtype.h does;
//   - malformed files are ConfigErrors naming the file and the problem;
//   - a sharded checkpoint (index + two shards) finds every tensor;
//   - tests/data/llama and gpt2 (transformers' save_pretrained): read into
//     our one-rank layout and written back, every tensor is bit-exact with
//     the file; a tensor-parallel rank's units hold exactly the elements of
//     the one-rank values that global_element_index names (the rank reads
//     only its rows and columns), padding rows zero;
//   - save_hf_checkpoint's config.json reads back to the same model.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "models/io/checkpoint.h"
#include "models/io/hf_config.h"
#include "models/io/hf_weights.h"
#include "models/io/safetensors.h"

namespace gpuledger {
namespace {

namespace fs = std::filesystem;
const std::string kData = GPULEDGER_TEST_DATA_DIR;

std::string scratch(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("gpuledger-io-" + std::to_string(::getpid())) / name;
  fs::create_directories(p.parent_path());
  return p.string();
}

SafetensorOut typed(const std::string& name, DType t, std::vector<int64_t> shape, const std::vector<float>& v) {
  SafetensorOut o{name, t, std::move(shape), std::vector<char>(v.size() * static_cast<size_t>(dtype_bytes(t)))};
  convert_from_fp32(v.data(), o.data.data(), t, static_cast<int64_t>(v.size()));
  return o;
}

TEST(Safetensors, WrittenIsReadBackBitExactInEveryDtype) {
  const std::vector<float> v = {1.0f, -2.5f, 3.14159f, 1e-3f, 65504.0f, -0.0f};
  const std::string path = scratch("three.safetensors");
  const std::vector<SafetensorOut> out = {typed("b.f32", DType::kFP32, {2, 3}, v),
                                          typed("a.bf16", DType::kBF16, {6}, v),
                                          typed("c.f16", DType::kFP16, {3, 2}, v)};
  write_safetensors(path, out, {{"format", "pt"}});
  const SafetensorsFile f(path);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  ASSERT_EQ(f.tensors().size(), 3u);
  for (const auto& t : out) {
    const SafetensorInfo& i = f.info(t.name);
    EXPECT_EQ(i.dtype, t.dtype);
    EXPECT_EQ(i.shape, t.shape);
    EXPECT_EQ(std::memcmp(f.raw(t.name), t.data.data(), t.data.size()), 0) << t.name;
    std::vector<float> want(v.size());
    convert_to_fp32(t.data.data(), t.dtype, want.data(), static_cast<int64_t>(v.size()));
    EXPECT_EQ(f.read_all_fp32(t.name), want) << t.name;
  }
  float two[2];
  f.read_fp32("b.f32", 2, 2, two);  // a slice: elements 2 and 3
  EXPECT_EQ(two[0], v[2]);
  EXPECT_EQ(two[1], v[3]);
  EXPECT_THROW(f.read_fp32("b.f32", 5, 2, two), std::out_of_range);
  // The data starts 8-byte aligned.
  std::ifstream in(path, std::ios::binary);
  uint64_t header_len = 0;
  in.read(reinterpret_cast<char*>(&header_len), 8);
  EXPECT_EQ(header_len % 8, 0u);
}

void expect_config_error(const std::string& path, const std::string& text) {
  try {
    SafetensorsFile f(path);
    ADD_FAILURE() << "no error for " << path;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

void write_raw(const std::string& path, const std::string& header, size_t data_bytes) {
  std::ofstream f(path, std::ios::binary);
  const uint64_t n = header.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << header << std::string(data_bytes, '\0');
}

TEST(Safetensors, MalformedFilesAreConfigErrorsSayingWhy) {
  const std::string p = scratch("bad.safetensors");
  expect_config_error(scratch("absent.safetensors"), "cannot open");
  std::ofstream(p) << "abc";
  expect_config_error(p, "shorter than its 8-byte header length");
  write_raw(p, "{\"x\": 1", 0);
  expect_config_error(p, "not a JSON object");
  write_raw(p, R"({"x": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 12]}})", 16);
  expect_config_error(p, "shape and dtype need 16");
  write_raw(p, R"({"x": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 8);
  expect_config_error(p, "outside the file");
  write_raw(p, R"({"x": {"dtype": "I8", "shape": [4], "data_offsets": [0, 4]}})", 4);
  expect_config_error(p, "dtype I8");
  std::ofstream(p, std::ios::binary) << std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8);
  expect_config_error(p, "past the end");
}

TEST(Checkpoint, ShardedIndexFindsEveryTensorInItsShard) {
  const fs::path dir = scratch("sharded");
  fs::create_directories(dir);
  write_safetensors((dir / "model-00001-of-00002.safetensors").string(), {typed("a", DType::kFP32, {2}, {1, 2})});
  write_safetensors((dir / "model-00002-of-00002.safetensors").string(), {typed("b", DType::kBF16, {1}, {3})});
  std::ofstream(dir / "model.safetensors.index.json")
      << R"({"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors",
            "b": "model-00002-of-00002.safetensors", "c": "model-00002-of-00002.safetensors"}})";
  const Checkpoint ck(dir.string());
  EXPECT_EQ(ck.names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(ck.file("a").read_all_fp32("a"), (std::vector<float>{1, 2}));
  EXPECT_EQ(ck.file("b").read_all_fp32("b"), (std::vector<float>{3}));
  EXPECT_THROW(ck.file("c"), ConfigError);  // the index names a shard that lacks it
  EXPECT_THROW(ck.file("d"), ConfigError);
  EXPECT_THROW(Checkpoint(scratch("empty-folder-that-is-absent")), ConfigError);
}

// Unit by unit, the one-rank layout's values, concatenated.
std::vector<float> one_rank_values(const CheckpointWeights& w, const ModelConfig& m) {
  std::vector<float> all;
  for (const UnitLayout& u : make_param_layout(m, Layout{}, Coords{}).units) {
    const std::vector<float> v = w.unit_values(u);
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

class HfCheckpoint : public ::testing::TestWithParam<const char*> {};

TEST_P(HfCheckpoint, ReadIntoOurLayoutAndWrittenBackIsBitExact) {
  const std::string dir = kData + "/" + GetParam();
  const ModelConfig m = load_hf_config(dir + "/config.json");
  const CheckpointWeights w(dir, m);
  w.validate();
  const std::vector<SafetensorOut> back = hf_tensors(m, one_rank_values(w, m));
  const SafetensorsFile file(dir + "/model.safetensors");
  ASSERT_EQ(back.size(), file.tensors().size());
  for (const auto& t : back) {
    ASSERT_TRUE(file.has(t.name)) << t.name;
    EXPECT_EQ(file.info(t.name).shape, t.shape) << t.name;
    EXPECT_EQ(std::memcmp(file.raw(t.name), t.data.data(), t.data.size()), 0) << t.name;
  }
  // And through the files: save_hf_checkpoint, then our reader.
  const std::string out = scratch(std::string("saved-") + GetParam());
  save_hf_checkpoint(out, m, one_rank_values(w, m));
  const ModelConfig again = load_hf_config(out + "/config.json");
  EXPECT_EQ(hf_config_json(again), hf_config_json(m));
  const SafetensorsFile saved(out + "/model.safetensors");
  for (const auto& [name, info] : file.tensors())
    EXPECT_EQ(std::memcmp(saved.raw(name), file.raw(name), static_cast<size_t>(info.end_bytes - info.begin_bytes)), 0)
        << name;
}

TEST_P(HfCheckpoint, EveryTensorParallelRankReadsExactlyItsSlice) {
  const std::string dir = kData + "/" + GetParam();
  const ModelConfig m = load_hf_config(dir + "/config.json");
  const CheckpointWeights w(dir, m);
  const ParamLayout full = make_param_layout(m, Layout{}, Coords{});
  const Layout l{1, 2, 2, 0, false};  // tp 2, pp 2
  for (int64_t pp = 0; pp < 2; ++pp)
    for (int64_t tp = 0; tp < 2; ++tp) {
      for (const UnitLayout& u : make_param_layout(m, l, Coords{0, tp, pp}).units) {
        const std::vector<float> v = w.unit_values(u);
        for (const TensorSlot& t : u.tensors) {
          // The tied copy on the last stage is the embedding's word matrix.
          const UnitLayout& fu = t.tied_copy ? full.units[static_cast<size_t>(full.embedding_unit)]
                                             : *std::find_if(full.units.begin(), full.units.end(),
                                                             [&](const UnitLayout& x) { return x.name == u.name; });
          const TensorSlot& ft = t.tied_copy ? *fu.word_matrix() : fu.at(t.role);
          const std::vector<float> fv = w.unit_values(fu);
          for (int64_t r = 0; r < t.rows; ++r)
            for (int64_t c = 0; c < t.cols; ++c) {
              const float got = v[static_cast<size_t>(t.offset + r * t.cols + c)];
              const auto g = global_element_index(t, r, c);
              const float want = g ? fv[static_cast<size_t>(ft.offset + *g)] : 0.0f;
              ASSERT_EQ(got, want) << t.name << " tp " << tp << " (" << r << ", " << c << ")";
            }
        }
      }
    }
}

INSTANTIATE_TEST_SUITE_P(Models, HfCheckpoint, ::testing::Values("llama", "gpt2"));

TEST(HfCheckpointErrors, MissingWrongShapedOrUnrepresentedTensorsAreNamed) {
  const std::string dir = kData + "/llama";
  const ModelConfig m = load_hf_config(dir + "/config.json");
  const SafetensorsFile file(dir + "/model.safetensors");
  auto with = [&](const std::string& drop, const std::string& extra, std::vector<int64_t> shape) {
    std::vector<SafetensorOut> out;
    for (const auto& [name, info] : file.tensors())
      if (name != drop) out.push_back(fp32_tensor(name, info.shape, file.read_all_fp32(name).data()));
    if (!extra.empty()) out.push_back(typed(extra, DType::kFP32, shape, std::vector<float>(16, 0.0f)));
    const std::string p = scratch("edited.safetensors");
    write_safetensors(p, out);
    return p;
  };
  auto message = [&](const std::string& path) -> std::string {
    try {
      CheckpointWeights(path, m).validate();
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message(with("model.norm.weight", "", {})).find("no tensor model.norm.weight"), std::string::npos);
  EXPECT_NE(message(with("model.norm.weight", "model.norm.weight", {2, 8})).find("shape [2, 8]"), std::string::npos);
  EXPECT_NE(message(with("", "model.layers.0.self_attn.o_proj.bias", {16})).find("o_proj.bias is not part"),
            std::string::npos);
  EXPECT_EQ(message(with("", "model.layers.0.self_attn.rotary_emb.inv_freq", {16})), "");  // a buffer: ignored
}

}  // namespace
}  // namespace gpuledger
