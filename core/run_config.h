// RunConfig: how a training or inference run is executed (docs/architecture.md "Command
// line", run options) — independent of the model and of the layout.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/dtype.h"
#include "core/fp8.h"

namespace gpuledger {

enum class Schedule { k1F1B, kGPipe };
enum class Recompute { kNone, kSelective, kFull };
enum class AttentionKind { kMaterialized, kFlash };
// The optimizer's update rule (parallel/zero/update_rule.h): AdamW, SGD with
// momentum, Adagrad, Lion (docs/formulas/memory.md, bytes per parameter).
enum class OptimizerKind { kAdamW, kSGD, kAdagrad, kLion };

std::string_view schedule_name(Schedule s);        // "1f1b" | "gpipe"
std::string_view recompute_name(Recompute r);      // "none" | "selective" | "full"
std::string_view attention_name(AttentionKind a);  // "materialized" | "flash"
std::string_view optimizer_name(OptimizerKind o);  // "adamw" | "sgd" | "adagrad" | "lion"
std::optional<Schedule> schedule_from_name(std::string_view);
std::optional<Recompute> recompute_from_name(std::string_view);
std::optional<AttentionKind> attention_from_name(std::string_view);
std::optional<OptimizerKind> optimizer_from_name(std::string_view);

struct RunConfig {
  int64_t seq = 1024;        // s: tokens per sequence
  int64_t mbs = 1;           // b: micro-batch size (sequences)
  int64_t microbatches = 1;  // m: per data-parallel replica per step (gbs / (mbs·dp))
  Schedule schedule = Schedule::k1F1B;
  Recompute recompute = Recompute::kNone;
  AttentionKind attention = AttentionKind::kMaterialized;
  DType dtype = DType::kBF16;       // weights and activations
  DType grad_dtype = DType::kBF16;  // gradients (fp32 as Megatron's main_grad)
  // --dtype fp8: the layers' Linear GEMMs in FP8 under this recipe (core/fp8.h), with
  // dtype bf16 for weights and activations as TransformerEngine keeps them
  // (docs/formulas/fp8.md); kNone: no FP8.
  Fp8Recipe fp8 = Fp8Recipe::kNone;
  int64_t fp8_amax_history_len = kTeAmaxHistoryLen;
  double dropout = 0.0;  // p; > 0 adds masks (1 byte each) to the activations
  uint64_t seed = 1234;
  double bucket_mb = 25.0;          // DP gradient bucket size (MiB)
  bool overlap_grad_reduce = true;  // DP buckets all-reduced during the backward (two staging slots)
  int64_t prefetch = 1;             // ZeRO-3 layers gathered ahead
  // --tp-comm-overlap (Megatron's flag): the predicted step overlaps sequence parallelism's TP
  // all-gathers and reduce-scatters with their GEMMs (perf/sim/tp_overlap.h); no byte or FLOP changes.
  bool tp_comm_overlap = false;
  // --contiguous-grad-buffer: the predicted step reduces the DP gradient buckets in place, as
  // Megatron's DistributedDataParallel does: no bucket waits for a staging slot (perf/sim/grad_buffer.h).
  bool contiguous_grad_buffer = false;
  // --offload optimizer (ZeRO-Offload, Ren et al. 2021; DeepSpeed's offload_optimizer):
  // the fp32 master and optimizer state in host memory, the update on the CPU.
  bool offload_optimizer = false;
  OptimizerKind optimizer = OptimizerKind::kAdamW;
  double lr = 1e-3;            // every optimizer's learning rate
  double weight_decay = 0.0;   // on the matrices: decoupled (AdamW, Lion) or added to the gradient (SGD, Adagrad)
  double momentum = 0.9;       // SGD (torch.optim.SGD momentum; 0 keeps no momentum buffer)
  double lion_beta1 = 0.9;     // Lion's interpolation β1 (Chen et al. 2023, Alg. 1 default)
  double lion_beta2 = 0.99;    // Lion's momentum decay β2 (ibid.)
  double adagrad_eps = 1e-10;  // Adagrad's ε (torch.optim.Adagrad default)
  double grad_clip = 1.0;      // global gradient-norm clipping (0 = off)
  std::string init_from;       // --init-from: a Hugging Face checkpoint (folder or .safetensors); "": from seed
  std::string tokens;          // --tokens: a token file (llm.c .bin or .npy); "": the synthetic chain

  // Mixed precision: fp32 master weights exist only when dtype is 16-bit.
  bool has_master() const { return dtype != DType::kFP32; }
  bool fp8_training() const { return fp8 != Fp8Recipe::kNone; }
  int64_t global_batch(int64_t dp) const { return microbatches * mbs * dp; }
  int64_t tokens_per_step(int64_t dp) const { return global_batch(dp) * seq; }
};

}  // namespace gpuledger
