// A multi-head latent attention model has no Hugging Face config writer:
// writing one is an error naming kv_lora_rank, never a llama config that
// would describe another attention.
#include <gtest/gtest.h>

#include "core/model_config.h"
#include "models/io/hf_config.h"

namespace gpuledger {
namespace {

TEST(HfConfigMla, WritingIsRefusedNamingTheField) {
  const ModelConfig dense_mla = parse_model_config(
      R"({"name": "m", "flavour": "llama", "layers": 2, "hidden": 32, "heads": 4, "kv_heads": 4, "head_dim": 12,
          "ffn": 48, "vocab": 97, "max_seq": 64, "kv_lora_rank": 12, "qk_nope_head_dim": 8,
          "qk_rope_head_dim": 4, "v_head_dim": 6})",
      "m.json");
  try {
    hf_config_json(dense_mla);
    ADD_FAILURE() << "written";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), "kv_lora_rank");
  }
  EXPECT_THROW(hf_config_json(load_model("deepseek-v2-lite")), ConfigError);  // and a MoE one
}

}  // namespace
}  // namespace gpuledger
