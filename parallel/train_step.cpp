// Trainer (see train_step.h): one rank's model stage, its optimizer state and
// the training step.
//
// State (docs/exact-budget.md "Model states", ZeRO 0): per unit of the rank's
// ParamLayout, weights (e) and grads (g) held by Params; an fp32 master copy
// (account master) only when e is 16-bit; Adam m and v, fp32 (account optim).
//
// Step k:
//   1. zero the gradients;
//   2. walk the schedule table of the rank's stage (parallel/pp/schedule.h):
//      Forward j -> synthetic data of microbatch j (models/transformer/data.h:
//      global sample offset dp_rank·m·b + j·b), StageModel::forward;
//      Backward j -> StageModel::backward with d(token loss) = 1/(tokens of
//      the global batch), so the loss is the mean over the global batch;
//   3. (next issue: the DP gradient all-reduce / ZeRO reduce-scatter goes here,
//      and the p2p send/recv beside each table entry);
//   4. global gradient norm: Σ of sum_squares per unit (to be all-reduced over
//      the model-parallel groups, replicated tensors counted once);
//   5. clipping coefficient min(1, clip / (norm + 1e-6)) (Megatron's
//      clip_grad_norm_fp32; PyTorch's clip_grad_norm_), applied inside AdamW;
//   6. AdamW (lr, β = (0.9, 0.95), ε = 1e-8, the run's weight decay on the
//      matrices only — Megatron's default of no decay on biases and norms),
//      step counted from 1.
// Phase markers: "fwd.mb<k>.layer<i>", "bwd.mb<k>.layer<i>" (and .embedding,
// .head) from the model, "optimizer" here.
#include "parallel/train_step.h"

#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>

#include "models/transformer/data.h"
#include "models/transformer/model.h"
#include "models/transformer/param_layout.h"
#include "models/transformer/params.h"
#include "parallel/pp/schedule.h"

namespace gpuledger {

namespace {
constexpr float kBeta1 = 0.9f, kBeta2 = 0.95f, kAdamEps = 1e-8f;

double comm_seconds(const CommCounters* c) {
  if (c == nullptr) return 0.0;
  double s = 0.0;
  for (const auto& [key, count] : c->by_key()) s += count.seconds;
  return s;
}
}  // namespace

struct Trainer::Impl {
  Device& dev;
  ModelConfig model;
  RunConfig run;
  RankContext ctx;
  DType e, g;
  std::unique_ptr<Params> params;
  std::vector<Buffer> master, adam_m, adam_v;  // per unit
  std::unique_ptr<StageModel> stage;
  BigramData data;

  Impl(Device& d, const ModelConfig& m, const RunConfig& r, RankContext c)
      : dev(d), model(m), run(r), ctx(c), e(r.dtype),
        g(r.dtype == DType::kFP32 ? DType::kFP32 : r.grad_dtype), data(m.vocab, r.seed) {}
};

Trainer::Trainer(Device& device, const ModelConfig& model, const RunConfig& run, RankContext ctx)
    : impl_(std::make_unique<Impl>(device, model, run, ctx)) {
  Impl& I = *impl_;
  if (ctx.tp == nullptr || ctx.dp == nullptr || ctx.pp == nullptr)
    throw std::invalid_argument("Trainer: the RankContext needs tp, dp and pp communicators");
  validate_layout(ctx.layout, model, run);
  // This issue runs one rank per model replica and stage; the next adds the
  // pipeline's send/recv, the DP gradient reduction and ZeRO.
  if (ctx.layout.pp > 1 || ctx.layout.dp > 1 || ctx.layout.zero != 0 || ctx.layout.sp)
    throw std::invalid_argument("Trainer: pp > 1, dp > 1, ZeRO and sequence parallelism are not implemented yet");
  if (run.microbatches < 1 || run.mbs < 1 || run.seq < 1)
    throw std::invalid_argument("Trainer: microbatches, mbs and seq must be >= 1");

  I.params = std::make_unique<Params>(device, make_param_layout(model, ctx.layout, ctx.coords), I.e, I.g);
  const ParamLayout& pl = I.params->layout();
  for (const auto& u : pl.units) {
    if (run.has_master()) I.master.push_back(device.alloc(4 * u.elems, Account::kMaster, u.name + ".master"));
    I.adam_m.push_back(device.alloc(4 * u.elems, Account::kOptim, u.name + ".adam_m"));
    I.adam_v.push_back(device.alloc(4 * u.elems, Account::kOptim, u.name + ".adam_v"));
    device.fill_zero(I.adam_m.back().data(), I.adam_m.back().bytes());
    device.fill_zero(I.adam_v.back().data(), I.adam_v.back().bytes());
  }
  I.params->initialise(run.seed, model.layers, [&](size_t u, const std::vector<float>& v) {
    if (!I.master.empty()) device.copy_from_host(I.master[u].data(), v.data(), 4 * static_cast<int64_t>(v.size()));
  });
  I.stage = std::make_unique<StageModel>(device, *ctx.tp, model, run, ctx.layout, ctx.coords, *I.params);
}

Trainer::~Trainer() = default;

StepResult Trainer::step(int64_t step_index) {
  Impl& I = *impl_;
  Device& dev = I.dev;
  const RunConfig& r = I.run;
  const Layout& l = I.ctx.layout;
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t flops0 = dev.executed_flops();
  const double comm0 = comm_seconds(I.ctx.counters);

  I.params->zero_grads();

  const int64_t m = r.microbatches, b = r.mbs, s = r.seq;
  const int64_t gbs = r.global_batch(l.dp);
  const double global_tokens = static_cast<double>(r.tokens_per_step(l.dp));
  const float loss_scale = static_cast<float>(1.0 / global_tokens);
  const int64_t replica_first = I.ctx.coords.dp * m * b;
  std::vector<int32_t> ids(static_cast<size_t>(b * s)), targets(static_cast<size_t>(b * s));
  double loss_sum = 0.0;
  try {
    for (const ScheduleStep& op : make_schedule(r.schedule, l.pp, I.ctx.coords.pp, m)) {
      if (op.op == PipeOp::kForward) {
        const int64_t offset = replica_first + op.microbatch * b;
        if (dev.touches_memory()) I.data.batch(step_index, gbs, offset, b, s, ids.data(), targets.data());
        loss_sum += I.stage->forward(op.microbatch, step_index, offset, ids.data(), targets.data());
      } else {
        I.stage->backward(op.microbatch, loss_scale);
      }
    }
  } catch (...) {
    // An OutOfMemory (or any failure) mid-schedule: drop the microbatches in
    // flight so the Trainer is usable again; the exception carries the ledger
    // state at the failure.
    for (int64_t j = 0; j < m; ++j) I.stage->discard(j);
    throw;
  }
  // (DP gradient reduction / ZeRO: next issue)

  // global gradient norm (to be summed over the model-parallel groups)
  const ParamLayout& pl = I.params->layout();
  double sum_sq = 0.0;
  for (size_t u = 0; u < pl.units.size(); ++u)
    sum_sq += dev.sum_squares(I.params->grads(u).data(), I.g, pl.units[u].elems);
  const double norm = std::sqrt(sum_sq);
  float grad_scale = 1.0f;
  if (r.grad_clip > 0) {
    const double coef = r.grad_clip / (norm + 1e-6);
    if (coef < 1.0) grad_scale = static_cast<float>(coef);
  }

  dev.ledger().mark_phase("optimizer");
  const int64_t eb = dtype_bytes(I.e), gb = dtype_bytes(I.g);
  for (size_t u = 0; u < pl.units.size(); ++u) {
    const UnitLayout& unit = pl.units[u];
    // [0, decay_elems): matrices, decayed; the rest (norms, biases) not.
    const int64_t seg_begin[2] = {0, unit.decay_elems};
    const int64_t seg_end[2] = {unit.decay_elems, unit.elems};
    for (int k = 0; k < 2; ++k) {
      const int64_t off = seg_begin[k], n = seg_end[k] - seg_begin[k];
      if (n <= 0) continue;
      float* master = I.master.empty() ? nullptr
                                        : static_cast<float*>(byte_offset(I.master[u].data(), 4 * off));
      dev.adamw(master, byte_offset(I.params->weights(u).data(), eb * off), I.e,
                byte_offset(I.params->grads(u).data(), gb * off), I.g,
                static_cast<float*>(byte_offset(I.adam_m[u].data(), 4 * off)),
                static_cast<float*>(byte_offset(I.adam_v[u].data(), 4 * off)), n,
                static_cast<float>(r.lr), kBeta1, kBeta2, kAdamEps,
                k == 0 ? static_cast<float>(r.weight_decay) : 0.0f, step_index + 1, grad_scale);
    }
  }
  dev.synchronize();

  StepResult res;
  res.loss = loss_sum / global_tokens;  // (to be all-reduced over DP and taken from the last stage)
  res.grad_norm = norm;
  res.executed_flops = dev.executed_flops() - flops0;
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  res.comm_seconds = comm_seconds(I.ctx.counters) - comm0;
  res.compute_seconds = res.seconds - res.comm_seconds;
  return res;
}

std::vector<float> Trainer::parameters_fp32() const {
  const Impl& I = *impl_;
  const ParamLayout& pl = I.params->layout();
  std::vector<float> out(static_cast<size_t>(pl.total_elems()));
  std::vector<char> tmp;
  int64_t pos = 0;
  for (size_t u = 0; u < pl.units.size(); ++u) {
    const int64_t n = pl.units[u].elems;
    float* dst = out.data() + pos;
    if (!I.master.empty()) {  // the fp32 master is the parameter; the weights are its rounding
      I.dev.copy_to_host(dst, I.master[u].data(), 4 * n);
    } else if (I.e == DType::kFP32) {
      I.dev.copy_to_host(dst, I.params->weights(u).data(), 4 * n);
    } else {
      tmp.resize(static_cast<size_t>(n * dtype_bytes(I.e)));
      I.dev.copy_to_host(tmp.data(), I.params->weights(u).data(), static_cast<int64_t>(tmp.size()));
      convert_to_fp32(tmp.data(), I.e, dst, n);
    }
    pos += n;
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
