// Trainer (see train_step.h): one rank's training step for data, pipeline and
// tensor parallelism and ZeRO 0-3, composed of one part per concern, each
// described in its header: Params and StageModel (models/transformer), the
// optimizer (zero/sharded_optimizer.h with zero/elementwise_rule.h), the DP sum
// (dp/grad_sync.h: ZeRO 0 all-reduces buckets, ZeRO 1 reduce-scatters pieces
// into the shards), the ZeRO 2 reduce-scatter (zero/grad_shards.h),
// the ZeRO 3 gather (zero/param_gather.h), the schedule (pp/pipeline_executor.h)
// and the gradient finalisation (finalize_grads.h). The per-unit parts act
// inside the model's passes through one HookChain: ZeRO 3's gather outermost,
// then ZeRO 2's staging, then the DP overlap.
// Step k: 1. zero the gradients (a fresh DP reducer); 2. the schedule;
// 3. "grad_sync" (tp > 1, tied embeddings across stages, or dp > 1): the
// TP-partial and embedding-group sums, then the DP sum completes; 4. the
// global norm and the clipping coefficient; 5. "optimizer" (and
// "zero.all_gather" under ZeRO 1/2; on the host with --offload optimizer,
// zero/optimizer_offload.h, configured inside the ShardedOptimizer); 6. the loss: each last-stage rank's share
// (its token losses / global tokens, fp32) all-reduced over dp, then over pp,
// so every rank returns the global batch's mean (docs/formulas/comm.md).
// Context parallelism (cp > 1): the dp group is the dp·cp ranks (groups.h),
// each holding s/cp tokens of its replica's sequences, so the same sums give
// the global mean and the gradient; the stage runs its flash core over ctx.cp.
// Tied embeddings with pp > 1 under ZeRO 2/3 (dp > 1): the word's units keep
// their whole gradient through the schedule; step 3 sums its word slot over
// the embedding group, then reduce-scatters it (zero/grad_shards.h).
#include "parallel/train_step.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

#include "models/io/hf_weights.h"
#include "models/transformer/fp8_weights.h"
#include "models/transformer/model.h"
#include "models/transformer/params.h"
#include "parallel/dp/grad_sync.h"
#include "parallel/finalize_grads.h"
#include "parallel/hook_chain.h"
#include "parallel/pp/pipeline_executor.h"
#include "parallel/zero/elementwise_rule.h"
#include "parallel/zero/grad_shards.h"
#include "parallel/zero/param_gather.h"
#include "parallel/zero/sharded_optimizer.h"

namespace gpuledger {

namespace {
double comm_seconds(const CommCounters* c) {
  if (c == nullptr) return 0.0;
  double s = 0.0;
  for (const auto& [key, count] : c->by_key()) s += count.seconds;
  return s;
}

// Appends the valid elements of each part of a shard buffer (of type t) as fp32.
void append_shard_fp32(Device& dev, const void* shard, DType t, const UnitShard& sh, std::vector<float>& out) {
  std::vector<char> tmp(static_cast<size_t>(sh.shard_elems * dtype_bytes(t)));
  if (sh.shard_elems > 0) dev.copy_to_host(tmp.data(), shard, static_cast<int64_t>(tmp.size()));
  for (const ShardPart& part : sh.parts) {
    const size_t pos = out.size();
    out.resize(pos + static_cast<size_t>(part.valid));
    convert_to_fp32(tmp.data() + part.shard_at * dtype_bytes(t), t, out.data() + pos, part.valid);
  }
}

void check_context(const ModelConfig& model, const RunConfig& run, const RankContext& ctx) {
  if (ctx.tp == nullptr || ctx.dp == nullptr || ctx.pp == nullptr)
    throw std::invalid_argument("Trainer: the RankContext needs tp, dp and pp communicators");
  validate_layout(ctx.layout, model, run);
  const Layout& l = ctx.layout;
  // With context parallelism the dp group holds the dp·cp ranks that average gradients (groups.h).
  if (ctx.dp->size() != l.dp * l.cp || ctx.pp->size() != l.pp || ctx.tp->size() != l.tp ||
      (l.cp > 1 && (ctx.cp == nullptr || ctx.cp->size() != l.cp)))
    throw std::invalid_argument("Trainer: the communicators' sizes differ from the layout");
  if (model.tied_embeddings && l.pp > 1 && ctx.emb == nullptr && (ctx.first_stage() || ctx.last_stage()))
    throw std::invalid_argument("Trainer: tied embeddings with pp > 1 need the emb communicator");
  if (run.microbatches < 1 || run.mbs < 1 || run.seq < 1)
    throw std::invalid_argument("Trainer: microbatches, mbs and seq must be >= 1");
}
}  // namespace

struct Trainer::Impl {
  Device& dev;
  RunConfig run;
  RankContext ctx;
  std::unique_ptr<Params> params;
  std::unique_ptr<Fp8WeightState> fp8_weights;  // --dtype fp8 only
  std::unique_ptr<StageModel> stage;
  std::unique_ptr<ShardedOptimizer> optimizer;
  std::unique_ptr<DpGradSync> dp_sync;  // ZeRO 0/1, n > 1
  std::unique_ptr<PipelineExecutor> pipeline;
  std::unique_ptr<ZeroGradShards> grad_shards;    // ZeRO 2/3, n > 1
  std::unique_ptr<ZeroParamGather> param_gather;  // ZeRO 3, n > 1
  std::unique_ptr<FinalizeGrads> finalize;
  HookChain hooks;

  Impl(Device& d, const ModelConfig& model, const RunConfig& r, const RankContext& c) : dev(d), run(r), ctx(c) {
    const Layout& l = c.layout;
    const int64_t n = l.dp_cp();  // ZeRO shards over the data-parallel group with cp (dp·cp ranks, the dp comm)
    const bool shard_grads = l.zero >= 2 && n > 1, shard_weights = l.zero >= 3 && n > 1;
    const DType e = r.dtype, g = r.dtype == DType::kFP32 ? DType::kFP32 : r.grad_dtype;
    // ZeRO's groups: dp, and for a MoE layer's experts under ep > 1 the expert-data-parallel group
    const ShardGroups groups = c.shard_groups();
    Comm& expert_dp = c.expert_dp != nullptr ? *c.expert_dp : *c.dp;
    params = std::make_unique<Params>(d, make_param_layout(model, l, c.coords), e, g,
                                      ParamSharding{shard_grads, shard_weights, groups});
    if (r.fp8_training())
      fp8_weights = std::make_unique<Fp8WeightState>(d, params->layout(), r.fp8, r.fp8_amax_history_len,
                                                     model.is_moe() ? model.num_experts / l.ep : 0);
    stage = std::make_unique<StageModel>(d, *c.tp, model, r, l, c.coords, *params, c.ep, c.cp);
    optimizer = std::make_unique<ShardedOptimizer>(d, *c.dp, *params, r, l.zero, groups, make_update_rule(d, r),
                                                   c.counters, &expert_dp);
    auto load_master = [&](size_t u, const std::vector<float>& v) { optimizer->load_master(u, v); };
    if (r.init_from.empty()) {
      params->initialise(r.seed, model.layers, load_master);
    } else {  // each unit read from the rank's part of the checkpoint (hf_weights.h)
      const CheckpointWeights ckpt(r.init_from, model);
      params->initialise_from([&](const UnitLayout& unit) { return ckpt.unit_values(unit); }, load_master);
    }
    if (c.dp->size() > 1 && l.zero <= 1)  // dp·cp ranks sum their gradients
      dp_sync = std::make_unique<DpGradSync>(d, *c.dp, *stage, *params, r, static_cast<int>(l.zero), c.expert_dp);
    pipeline = std::make_unique<PipelineExecutor>(d, c, model, r);
    if (shard_grads) grad_shards = std::make_unique<ZeroGradShards>(d, *c.dp, expert_dp, *stage, *params);
    if (shard_weights)
      param_gather =
          std::make_unique<ZeroParamGather>(d, *c.dp, expert_dp, *stage, *params, std::max<int64_t>(r.prefetch, 0));
    std::vector<bool> tp_sum_after_schedule;
    for (size_t u = 0; u < params->units(); ++u)
      tp_sum_after_schedule.push_back(!shard_grads && !(dp_sync && dp_sync->sums_tp_partials_in_backward(u)));
    FinalizeGrads::FullGrad full_grad;
    if (grad_shards) full_grad = [gs = grad_shards.get()](size_t u) { return gs->full_grad(u); };
    finalize = std::make_unique<FinalizeGrads>(d, c, model, *stage, *params, std::move(tp_sum_after_schedule),
                                               std::move(full_grad));
    hooks.add(param_gather.get());
    hooks.add(grad_shards.get());
    hooks.add(dp_sync.get());
    if (!hooks.empty()) stage->set_unit_hooks(&hooks);
  }

  // A step that failed midway: nothing gathered, staged or in flight is kept.
  void abandon_step() {
    if (grad_shards) grad_shards->release();
    if (param_gather) param_gather->release_all();
    if (dp_sync) dp_sync->abandon();
  }
};

Trainer::Trainer(Device& device, const ModelConfig& model, const RunConfig& run, RankContext ctx) {
  check_context(model, run, ctx);
  impl_ = std::make_unique<Impl>(device, model, run, ctx);
}

Trainer::~Trainer() = default;

StepResult Trainer::step(int64_t step_index) {
  Impl& I = *impl_;
  Device& dev = I.dev;
  const Layout& l = I.ctx.layout;
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t flops0 = dev.executed_flops();
  const double comm0 = comm_seconds(I.ctx.counters);

  I.params->zero_grads();
  if (I.dp_sync) I.dp_sync->start_step();
  double loss_sum = 0.0;
  try {
    loss_sum = I.pipeline->run(*I.stage, step_index);
  } catch (...) {
    I.abandon_step();  // the exception carries the ledger state at the failure
    throw;
  }

  if (l.tp > 1 || I.finalize->syncs_embedding() || l.dp * l.cp > 1) dev.ledger().mark_phase("grad_sync");
  I.finalize->reduce_model_parallel();
  if (I.grad_shards) I.grad_shards->reduce_deferred();  // after the embedding-group sum
  if (I.dp_sync) I.dp_sync->finish();
  // router_bias: the expert bias moves by the step's load counts (Megatron-LM
  // does it in finalize_model_grads, before the optimizer step).
  I.stage->update_expert_bias(*I.ctx.dp);
  const double norm = I.finalize->grad_norm(/*reduce=*/I.run.grad_clip > 0);
  I.optimizer->step(step_index + 1, FinalizeGrads::clip_coefficient(norm, I.run.grad_clip));

  // the loss of the global batch, on every rank
  const double global_tokens = static_cast<double>(I.run.tokens_per_step(l.dp));
  double loss = all_reduce_scalar(dev, *I.ctx.dp, loss_sum / global_tokens);
  loss = all_reduce_scalar(dev, *I.ctx.pp, loss);
  dev.synchronize();

  StepResult res;
  res.loss = loss;
  res.grad_norm = norm;
  res.executed_flops = dev.executed_flops() - flops0;
  res.moe_dropped_choices = I.stage->take_moe_dropped_choices();
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  res.comm_seconds = comm_seconds(I.ctx.counters) - comm0;
  res.compute_seconds = res.seconds - res.comm_seconds;
  return res;
}

std::vector<float> Trainer::parameters_fp32() const {
  // Under ZeRO 3 (n > 1) a rank holds each unit's shard only: the values of
  // each part's valid shard elements, part by part, unit by unit
  // (models/transformer/unit_shard.h) — the shard buffer's order.
  const Impl& I = *impl_;
  const Params& p = *I.params;
  std::vector<float> out;
  std::vector<char> tmp;
  for (size_t u = 0; u < p.units(); ++u) {
    if (p.weights_sharded()) {  // 16-bit or fp32 weights of each part's shard
      append_shard_fp32(I.dev, p.weights(u).data(), p.weight_type(), I.optimizer->shard(u), out);
      continue;
    }
    const int64_t n = p.layout().units[u].elems;
    const size_t pos = out.size();
    out.resize(pos + static_cast<size_t>(n));
    float* dst = out.data() + pos;
    if (n == 0) continue;
    if (const Buffer* master = I.optimizer->whole_master(u)) {  // the parameter; the weights its rounding
      I.dev.copy_to_host(dst, master->data(), 4 * n);
    } else if (p.weight_type() == DType::kFP32) {
      I.dev.copy_to_host(dst, p.weights(u).data(), 4 * n);
    } else {  // 16-bit weights (under ZeRO the master holds only a shard): their values
      tmp.resize(static_cast<size_t>(n * dtype_bytes(p.weight_type())));
      I.dev.copy_to_host(tmp.data(), p.weights(u).data(), static_cast<int64_t>(tmp.size()));
      convert_to_fp32(tmp.data(), p.weight_type(), dst, n);
    }
  }
  return out;
}

std::vector<float> Trainer::gradients_fp32() const {
  // Under ZeRO 2/3 (n > 1) each unit's shard: the gradients of each part's
  // valid shard elements, as parameters_fp32 returns the weights under ZeRO 3.
  const Impl& I = *impl_;
  const Params& p = *I.params;
  std::vector<float> out;
  std::vector<char> tmp;
  for (size_t u = 0; u < p.units(); ++u) {
    if (p.grads_sharded()) {
      append_shard_fp32(I.dev, p.grads(u).data(), p.grad_type(), I.optimizer->shard(u), out);
      continue;
    }
    const int64_t n = p.layout().units[u].elems;
    tmp.resize(static_cast<size_t>(n * dtype_bytes(p.grad_type())));
    if (n > 0) I.dev.copy_to_host(tmp.data(), p.grads(u).data(), static_cast<int64_t>(tmp.size()));
    const size_t pos = out.size();
    out.resize(pos + static_cast<size_t>(n));
    convert_to_fp32(tmp.data(), p.grad_type(), out.data() + pos, n);
  }
  return out;
}

std::vector<std::pair<std::string, int64_t>> Trainer::parameter_tensors() const {
  std::vector<std::pair<std::string, int64_t>> out;
  for (const auto& u : impl_->params->layout().units)
    for (const auto& t : u.tensors) out.emplace_back(t.name, t.elems());
  return out;
}

}  // namespace gpuledger
