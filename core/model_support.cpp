// See model_support.h.
#include "core/model_support.h"

#include <string>

#include "core/device_spec.h"

namespace gpuledger {

namespace {

// Multi-head latent attention (docs/formulas/mla.md "Training"): train and
// plan build its layers (models/transformer/mla_layer.cpp) with the
// materialized core, without attention dropout and with no context
// parallelism (a model file of MLA has no sliding window: validate_mla);
// infer's engine has no latent cache.
void require_runnable_mla(const ModelConfig& m, const Layout& l, const RunConfig& r, ModelUse use,
                          const std::string& model) {
  if (!m.is_mla() || use == ModelUse::kKvSizing) return;
  const std::string mla = model + " has multi-head latent attention (kv_lora_rank)";
  if (use == ModelUse::kInfer)
    throw ConfigError("kv_lora_rank", mla +
                                          ", which infer does not serve yet (no latent KV cache in the engine): kv "
                                          "and serve-plan size it, train and plan run it");
  if (r.attention != AttentionKind::kMaterialized)
    throw ConfigError("attention", mla +
                                       ": its query/key head (qk_nope_head_dim + qk_rope_head_dim) differs from "
                                       "the value head, which the flash kernel does not take: use --attention "
                                       "materialized");
  if (l.cp > 1)
    throw ConfigError("cp",
                      mla + ", which runs on one context-parallel rank: give cp 1, got cp " + std::to_string(l.cp));
  if (r.dropout > 0) throw ConfigError("dropout", mla + ", whose attention block has no dropout: give --dropout 0");
}

}  // namespace

void require_runnable_model(const ModelConfig& m, const Layout& l, const RunConfig& r, ModelUse use) {
  const std::string model = "model '" + m.name + "'";
  require_runnable_mla(m, l, r, use, model);
  // kv and serve-plan size the cache and the weights only: no layer is built, so no layout is refused here.
  if (use == ModelUse::kKvSizing) return;
  // Decode reads the cache through cached_attention, whose softmax has no sink
  // term (the training cores have: kernels/device.h attention_sinks_*).
  if (m.attention_sinks && use == ModelUse::kInfer)
    throw ConfigError("attention_sinks",
                      model +
                          " has attention sinks (attention_sinks, gpt-oss), which infer's cached attention does not "
                          "compute yet: kv and serve-plan size its cache, train and plan run it");
  if (m.qk_norm && l.tp > 1)
    throw ConfigError("qk_norm", model + " has QK norm (Qwen3), whose γ gradient the runs do not sum over " +
                                     "tensor-parallel ranks yet: give tp 1, got tp " + std::to_string(l.tp));
  if (!m.is_moe()) return;
  // The first dense_layers layers hold a dense MLP, the rest the sparse block:
  // model chunks of different sizes, whose interleaved peak (pairs in flight ×
  // one chunk's layers, docs/exact-budget.md "Interleaved stages") is not built.
  if (m.dense_layers > 0 && l.vpp > 1)
    throw ConfigError("dense_layers", model + " has " + std::to_string(m.dense_layers) +
                                          " dense layers before its MoE layers: interleaved stages (--vpp " +
                                          std::to_string(l.vpp) + ") are built for models whose layers are alike");
  if (l.tp > 1)
    throw ConfigError("num_experts", model + " is a mixture of experts: the runs build it with data, expert and " +
                                         "pipeline parallelism only (tp = 1), got tp " + std::to_string(l.tp));
}

void require_runnable_fp8(const ResolvedConfig& r, ModelUse use) {
  if (!r.run.fp8_training()) return;
  if (use == ModelUse::kKvSizing)
    throw ConfigError("dtype",
                      "--dtype fp8 is a training precision (train, plan, sweep, check): the KV cache is sized in "
                      "bf16, fp16 or fp32");
  if (r.layout.zero >= 3)
    throw ConfigError("zero", "--dtype fp8 with --zero 3: the FP8 weight copy of a gathered unit is not built");
  if (r.device && !r.device->peak_fp8_flops)
    throw ConfigError("device", "--dtype fp8 on " + r.device->name + " (" + r.device->description +
                                    "): it has no FP8 tensor cores (FP8 needs Ada, Hopper or Blackwell)");
}

void require_fp8_backend(const RunConfig& r, std::string_view backend, bool training) {
  if (!r.fp8_training()) return;
  if (!training)
    throw ConfigError("dtype", "--dtype fp8 is a training precision: infer serves bf16, fp16 or fp32 weights");
  if (backend == "cuda")
    throw ConfigError("backend",
                      "--dtype fp8 on --backend cuda: the CUDA backend has no FP8 GEMM (a cuBLASLt FP8 matmul with "
                      "per-tensor scales is not built); train fp8 on --backend cpu (emulated) or meta");
}

void override_capacity_factor(ModelConfig& m, double capacity_factor) {
  if (!m.is_moe())
    throw ConfigError("capacity_factor", "--capacity-factor needs a mixture-of-experts model; " + m.name + " is dense");
  m.capacity_factor = capacity_factor;
  validate_model_config(m);
}

}  // namespace gpuledger
