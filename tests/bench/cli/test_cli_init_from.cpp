// CLI tests of --init-from, --tokens and --save-weights: a transformers
// checkpoint and token file (tests/data, scripts/make_reference.py) trained
// one step gives transformers' first loss and every account equal to its
// budget; the saved folder reads back (our reader) to the model and tensors
// transformers wrote; infer serves prompts from the token file; bad files and
// contradicting options are exit 2 with a message naming the problem.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "models/io/hf_config.h"
#include "models/io/safetensors.h"
#include "run_cli.h"

using gpuledger::testing::run_cli;
using gpuledger::testing::scratch_dir;
using gpuledger::testing::write_file;

namespace gpuledger {
namespace {

const std::string kData = std::string(GPULEDGER_SOURCE_DIR) + "/tests/data";

TEST(CliInitFrom, TrainsFromTheCheckpointAndSavesWhatTransformersWrote) {
  const std::string out = scratch_dir("saved-llama");
  auto r = run_cli({"train",
                    "--init-from",
                    kData + "/llama",
                    "--tokens",
                    kData + "/llama/tokens.npy",
                    "--seq",
                    "8",
                    "--mbs",
                    "2",
                    "--dtype",
                    "fp32",
                    "--steps",
                    "1",
                    "--warmup",
                    "0",
                    "--grad-clip",
                    "0",
                    "--weight-decay",
                    "0.1",
                    "--save-weights",
                    out,
                    "--json",
                    "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = r.json();
  const SafetensorsFile ref(kData + "/llama/reference.safetensors");
  const double want = ref.read_all_fp32("loss")[0];
  EXPECT_NEAR(doc["summary"]["loss"][0].get<double>(), want, 1e-5 * want);
  for (const auto& c : doc["checks"]) EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
  // The saved model: the same config, the same tensors by name and shape, fp32.
  EXPECT_EQ(hf_config_json(load_hf_config(out + "/config.json")),
            hf_config_json(load_hf_config(kData + "/llama/config.json")));
  const SafetensorsFile saved(out + "/model.safetensors"), orig(kData + "/llama/model.safetensors");
  ASSERT_EQ(saved.tensors().size(), orig.tensors().size());
  for (const auto& [name, info] : orig.tensors()) {
    ASSERT_TRUE(saved.has(name)) << name;
    EXPECT_EQ(saved.info(name).shape, info.shape) << name;
  }
  // After one step the weights are transformers' after its AdamW step (test_oracle holds each to 1e-5).
  const std::vector<float> norm = saved.read_all_fp32("model.norm.weight"),
                           norm_ref = ref.read_all_fp32("updated.model.norm.weight");
  for (size_t i = 0; i < norm.size(); ++i) EXPECT_NEAR(norm[i], norm_ref[i], 1e-5) << i;
}

TEST(CliInitFrom, InferServesPromptsFromTheTokenFile) {
  auto r =
      run_cli({"infer", "--init-from", kData + "/gpt2", "--tokens", kData + "/gpt2/tokens.bin", "--prompt-len", "8",
               "--gen-len", "4", "--requests", "2", "--device-memory", "1G", "--dtype", "fp32", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.json()["status"], "ok");
}

void expect_usage_error(const std::vector<std::string>& args, const std::string& text) {
  const auto r = run_cli(args);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find(text), std::string::npos) << r.err;
}

TEST(CliInitFrom, BadFilesAndContradictionsAreUsageErrors) {
  const std::string llama = kData + "/llama", npy = kData + "/llama/tokens.npy";
  expect_usage_error({"train", "--init-from", llama, "--model", "tiny-llama"}, "leave --model out");
  expect_usage_error({"train", "--init-from", llama + "/model.safetensors"}, "name the model with --model");
  expect_usage_error({"train", "--init-from", llama + "/model.safetensors", "--model", "tiny-llama"}, "has shape");
  expect_usage_error({"train", "--init-from", scratch_dir("nothing")}, "neither model.safetensors");
  expect_usage_error({"train", "--init-from", llama, "--tokens", npy, "--seq", "16"}, "--seq 16 needs rows of 17");
  expect_usage_error({"train", "--init-from", llama, "--tokens", llama + "/config.json", "--seq", "8"},
                     "neither a .npy file nor an llm.c token file");
  expect_usage_error({"train", "--model", "tiny-llama", "--tokens", kData + "/gpt2/tokens.bin", "--seq", "4", "--mbs",
                      "1", "--backend", "meta", "--save-weights", scratch_dir("meta")},
                     "not with --backend meta");
  const std::string odd = scratch_dir("odd-config");
  std::ifstream in(llama + "/config.json");
  auto j = nlohmann::json::parse(in);
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 4.0}};
  write_file(odd + "/config.json", j.dump());
  std::filesystem::copy_file(llama + "/model.safetensors", odd + "/model.safetensors",
                             std::filesystem::copy_options::overwrite_existing);
  expect_usage_error({"train", "--init-from", odd}, "\"rope_scaling\"");
}

}  // namespace
}  // namespace gpuledger
