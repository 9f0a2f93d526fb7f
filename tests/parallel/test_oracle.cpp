// gpuledger against an outside oracle: PyTorch + Hugging Face transformers.
//
// tests/data/{llama,gpt2}/ were produced by scripts/make_reference.py (torch
// 2.15.0, transformers 5.24.0; the versions are in each reference's
// metadata): a tiny random LlamaForCausalLM (GQA 4:2, head_dim 8 with hidden
// 16, untied head, rms_norm_eps 1e-6, RoPE θ 500000) and GPT2LMHeadModel (tied
// head), saved with save_pretrained as safetensors; a token batch (llama: .npy
// [2, 9] int32; gpt2: llm.c's .bin stream); and reference.safetensors with
// transformers' loss, every gradient ("grad.<name>") and every parameter after
// one torch.optim.AdamW step ("updated.<name>"), hyperparameters in its
// metadata. Regenerate with `python3 scripts/make_reference.py` from the
// repository root (it needs torch and transformers; CI runs only this test).
//
// The run here: --init-from the checkpoint, --tokens the batch, fp32, one
// microbatch of the whole batch, dropout 0, no gradient clipping, AdamW with
// the reference's lr and weight decay (decay on the matrices only, as the
// script's parameter groups). Required: the loss to 1e-5 relative, every
// gradient to 1e-4 of its tensor's largest magnitude, every updated weight
// to 1e-5 absolute (but those of zero gradient, see below). On the CPU backend always; on CUDA when a GPU is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "models/io/hf_config.h"
#include "models/io/hf_weights.h"
#include "models/io/safetensors.h"
#include "parallel/zero/elementwise_rule.h"
#include "trainer_rig.h"

namespace gpuledger {
namespace {

const std::string kData = GPULEDGER_TEST_DATA_DIR;

struct Case {
  std::string model, tokens;
};

struct Diff {
  double max_abs = 0, ref_max = 0;
};

Diff compare(const std::vector<float>& ours, const std::vector<float>& ref) {
  Diff d;
  for (size_t i = 0; i < ref.size(); ++i) {
    d.max_abs = std::max(d.max_abs, std::abs(static_cast<double>(ours[i]) - ref[i]));
    d.ref_max = std::max(d.ref_max, std::abs(static_cast<double>(ref[i])));
  }
  return d;
}

void check_against_reference(const std::string& backend, const Case& c) {
  const std::string dir = kData + "/" + c.model;
  const SafetensorsFile ref(dir + "/reference.safetensors");
  const auto& meta = ref.metadata();
  // Our AdamW's constants (fp32) are the reference's.
  ASSERT_EQ(static_cast<float>(std::stod(meta.at("beta1"))), AdamW::kBeta1);
  ASSERT_EQ(static_cast<float>(std::stod(meta.at("beta2"))), AdamW::kBeta2);
  ASSERT_EQ(static_cast<float>(std::stod(meta.at("eps"))), AdamW::kEps);

  const ModelConfig m = load_hf_config(dir + "/config.json");
  CheckpointWeights(dir, m).validate();
  RunConfig r;
  r.seq = std::stoll(meta.at("seq"));
  r.mbs = std::stoll(meta.at("batch"));
  r.microbatches = 1;
  r.dtype = r.grad_dtype = DType::kFP32;
  r.dropout = 0.0;
  r.grad_clip = 0.0;
  r.lr = std::stod(meta.at("lr"));
  r.weight_decay = std::stod(meta.at("weight_decay"));
  r.init_from = dir;
  r.tokens = dir + "/" + c.tokens;

  std::unique_ptr<testing::TrainerRig> rig;
  try {
    rig = std::make_unique<testing::TrainerRig>(backend, m, r);
  } catch (const std::exception& e) {
    if (backend == "cpu") throw;
    GTEST_SKIP() << backend << ": " << e.what();
  }
  const StepResult step = rig->trainer->step(0);
  const double ref_loss = ref.read_all_fp32("loss")[0];
  EXPECT_NEAR(step.loss, ref_loss, 1e-5 * ref_loss) << c.model << " loss";
  std::printf("%s %s: loss %.9g, transformers %.9g (relative difference %.3g)\n", backend.c_str(), c.model.c_str(),
              step.loss, ref_loss, std::abs(step.loss - ref_loss) / ref_loss);

  // Gradients and updated weights, under transformers' names.
  double worst_grad = 0, worst_weight = 0;
  const auto grads = hf_tensors(m, rig->trainer->gradients_fp32());
  const auto weights = hf_tensors(m, rig->trainer->parameters_fp32());
  ASSERT_EQ(grads.size(), weights.size());
  int64_t compared = 0, undetermined_elems = 0;
  for (size_t i = 0; i < grads.size(); ++i) {
    const std::string& name = grads[i].name;
    ASSERT_TRUE(ref.has("grad." + name)) << name;
    const auto* g = reinterpret_cast<const float*>(grads[i].data.data());
    const auto* w = reinterpret_cast<const float*>(weights[i].data.data());
    const std::vector<float> ref_g = ref.read_all_fp32("grad." + name), ref_w = ref.read_all_fp32("updated." + name);
    ASSERT_EQ(ref_g.size() * 4, grads[i].data.size()) << name;
    const Diff dg = compare(std::vector<float>(g, g + ref_g.size()), ref_g);
    EXPECT_LE(dg.max_abs, 1e-4 * dg.ref_max) << "gradient of " << name;
    worst_grad = std::max(worst_grad, dg.max_abs / dg.ref_max);
    // An element whose gradient is zero to within the gradient tolerance has
    // no determined sign, and Adam's first step, lr·g/(|g| + ε), turns its
    // rounding noise into a step of up to lr either way: its weight is held
    // to 2·lr. (GPT-2's key bias is such: it adds q·b_k to every score of a
    // row, which the softmax ignores, so its true gradient is 0.)
    for (size_t k = 0; k < ref_w.size(); ++k) {
      const bool both_zero = ref_g[k] == 0.0f && g[k] == 0.0f;  // e.g. rows of tokens not in the batch
      const bool undetermined = !both_zero && std::abs(ref_g[k]) <= 1e-4 * dg.ref_max;
      const double diff = std::abs(static_cast<double>(w[k]) - ref_w[k]);
      EXPECT_LE(diff, undetermined ? 2 * r.lr : 1e-5) << "updated " << name << "[" << k << "]";
      if (undetermined) {
        ++undetermined_elems;
      } else {
        worst_weight = std::max(worst_weight, diff);
      }
    }
    ++compared;
  }
  // Every parameter of the reference was compared (grad.* and updated.* per tensor).
  EXPECT_EQ(static_cast<size_t>(2 * compared + 2), ref.tensors().size());
  std::printf(
      "%s %s: %lld tensors; worst gradient difference %.3g of its tensor's max, worst weight %.3g "
      "(%lld elements of zero gradient held to 2 lr)\n",
      backend.c_str(), c.model.c_str(), static_cast<long long>(compared), worst_grad, worst_weight,
      static_cast<long long>(undetermined_elems));
}

TEST(Oracle, LlamaOneStepOnCpuEqualsTransformers) { check_against_reference("cpu", {"llama", "tokens.npy"}); }
TEST(Oracle, Gpt2OneStepOnCpuEqualsTransformers) { check_against_reference("cpu", {"gpt2", "tokens.bin"}); }
TEST(Oracle, LlamaOneStepOnCudaEqualsTransformers) { check_against_reference("cuda", {"llama", "tokens.npy"}); }
TEST(Oracle, Gpt2OneStepOnCudaEqualsTransformers) { check_against_reference("cuda", {"gpt2", "tokens.bin"}); }

}  // namespace
}  // namespace gpuledger
