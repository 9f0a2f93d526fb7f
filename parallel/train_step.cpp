// Trainer (see train_step.h): one rank's model stage, its optimizer state and
// the training step, for data, pipeline and tensor parallelism and ZeRO 0-3.
//
// State (docs/exact-budget.md "Model states"): per unit of the rank's
// ParamLayout, weights (e) and grads (g) held by Params; an fp32 master copy
// (account master) only when e is 16-bit; Adam m and v, fp32 (account optim).
// ZeRO 1 (Rajbhandari et al. 2020, P_os): master, m and v hold only the rank's
// shard of each unit, ⌈P_u/n⌉ elements (parallel/zero/shard.h). ZeRO 2
// (P_os+g) also shards the gradients (Params ParamSharding): each unit's
// backward writes its full gradient into one staging buffer (account comm),
// zeroed before and reduce-scattered over dp into the shard right after
// (StageModel::backward_unit_hook), every microbatch. ZeRO 3 (P_os+g+p) also
// shards the weights (e·⌈P_u/n⌉ per unit): each unit is all-gathered into a
// full copy (account weights) before its forward and before its backward,
// --prefetch units ahead, and freed after (StageModel::forward_unit_hook,
// backward_unit_hook; the layer rebinds to the copy); the optimizer updates
// the shard and nothing is gathered after the step.
// Tied embeddings under ZeRO 2/3 with n > 1 and p = 1 (the head reads and
// writes the embedding unit's word matrix, ParamLayout head_uses_embedding):
// the head's backward accumulates d(word) into a side buffer "tied_word.grad"
// of V'/t·h elements of g (account comm; StageModel::tied_word_grad), zeroed
// at the head unit's backward begin, since the staging buffer then holds the
// head unit's gradient; at the embedding unit's backward begin (the staging
// buffer zeroed) it is copied into the staging buffer's word slot and freed,
// the embedding's backward accumulates on top and the unit's reduce-scatter
// carries both. ZeRO 3 also gathers the embedding unit for the head's forward
// and backward (when not already gathered, i.e. outside the backward prefetch
// window) and frees it at the head's end: docs/exact-budget.md and
// docs/formulas/comm.md count the side buffer, the extra gathered copy and
// the extra all-gathers. With p > 1 tied + ZeRO 2/3 + n > 1 is refused
// (validate_layout; as DeepSpeed's PipelineEngine allows ZeRO <= 1 only).
// Comm staging (account comm, allocated once, docs/exact-budget.md
// "Communication staging"): the DP bucket (n > 1, ZeRO 0/1), and the PP
// send/recv buffers of e·b·s_l·h each (p > 1: first stage send-activation +
// recv-gradient, last recv-activation + send-gradient, middle all four).
//
// Step k:
//   1. zero the gradients;
//   2. walk the schedule table of the rank's stage (parallel/pp/schedule.h):
//      Forward j -> (not first stage) receive the activation from stage − 1
//      into the recv buffer; synthetic data of microbatch j
//      (models/transformer/data.h: global sample offset dp_rank·m·b + j·b);
//      StageModel::forward; (not last) send the output to stage + 1.
//      Backward j -> (not last) receive the output gradient from stage + 1;
//      StageModel::backward with d(token loss) = 1/(tokens of the global
//      batch), so the loss is the mean over the global batch and the sum over
//      DP replicas is its gradient; (not first) send the input gradient to
//      stage − 1. Sends are paired with receives (parallel/pp/p2p.h);
//   3. the model's TP-partial gradients summed over tp
//      (StageModel::reduce_tp_partial_grads); tied embeddings with p > 1:
//      all-reduce the word-embedding gradient of the first stage and the
//      last stage's copy over ctx.emb (Megatron's
//      embedding group); then the DP all-reduce in buckets (n > 1, ZeRO 0/1;
//      parallel/dp/grad_buckets.h). With run.overlap_grad_reduce (the
//      default) the buckets are started during the last microbatch's
//      backward instead: when a unit's backward ends for the m-th time its
//      TP-partial gradients are summed and it is marked final, and every
//      bucket whose units are all final starts (a unit holding a tied copy
//      waits for the embedding sum after the schedule); the step waits for
//      all of them before the norm;
//   4. global gradient norm: Σ of squares of every gradient element, a tensor
//      replicated over TP (norms, row-parallel biases, positions) counted on TP
//      rank 0 only, K/V rows of a KV head replicated over t/k ranks (t > k) on
//      the first of them, the last stage's tied copy not at all; the fp32 sum is
//      all-reduced over tp and pp, and over dp when ZeRO 2/3 shard the
//      gradients (docs/formulas/comm.md "Gradient clipping");
//   5. clipping coefficient min(1, clip / (norm + 1e-6)) (Megatron's
//      clip_grad_norm_fp32; PyTorch's clip_grad_norm_), applied inside AdamW;
//   6. AdamW (lr, β = (0.9, 0.95), ε = 1e-8, the run's weight decay on the
//      matrices only — Megatron's default of no decay on biases and norms),
//      step counted from 1, on the rank's shard (ZeRO ≥ 1) or the whole unit;
//   7. ZeRO 1/2 with n > 1: all-gather each unit's updated weights from the shards;
//   8. the loss: each last-stage rank's share (sum of its token losses / global
//      tokens, fp32) is all-reduced over dp and then over pp, so every rank
//      returns the global batch's mean (docs/formulas/comm.md counts both).
// Phase markers: "fwd.mb<k>.layer<i>", "bwd.mb<k>.layer<i>" (and .embedding,
// .head) from the model, "grad_sync", "optimizer" and "zero.all_gather" here.
// Not done: ZeRO 2/3 with tied embeddings, dp > 1 and pp > 1 (refused, see
// the constructor and validate_layout).
#include "parallel/train_step.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>
#include <unordered_set>

#include "models/transformer/data.h"
#include "models/transformer/model.h"
#include "models/transformer/param_layout.h"
#include "models/transformer/params.h"
#include "parallel/dp/grad_buckets.h"
#include "parallel/pp/p2p.h"
#include "parallel/pp/schedule.h"
#include "parallel/zero/shard.h"

namespace gpuledger {

namespace {
constexpr float kBeta1 = 0.9f, kBeta2 = 0.95f, kAdamEps = 1e-8f;

double comm_seconds(const CommCounters* c) {
  if (c == nullptr) return 0.0;
  double s = 0.0;
  for (const auto& [key, count] : c->by_key()) s += count.seconds;
  return s;
}

// Tensors every TP rank holds whole (docs/exact-budget.md "Parameters held by
// a rank": norm weights, row-parallel biases, learned positions).
bool replicated_over_tp(const std::string& role) {
  static const std::unordered_set<std::string> kRoles = {
      "norm1.weight", "norm1.bias", "attn_out.bias", "norm2.weight", "norm2.bias",
      "mlp_out.bias", "position.weight", "norm.weight", "norm.bias"};
  return kRoles.count(role) != 0;
}
}  // namespace

struct Trainer::Impl {
  Device& dev;
  ModelConfig model;
  RunConfig run;
  RankContext ctx;
  DType e, g;
  int64_t n = 1, dp_rank = 0;   // dp group
  bool shard_optim = false;      // ZeRO >= 1: master and Adam states hold the shard
  bool shard_grads = false;      // ZeRO 2/3, n > 1: gradients hold the shard (Params ParamSharding)
  bool shard_weights = false;    // ZeRO 3, n > 1: weights hold the shard, gathered per unit
  int64_t prefetch = 1;          // ZeRO 3: units gathered ahead
  bool tied_sharded = false;     // ZeRO 2/3, n > 1, p = 1, tied: the head's d(word) goes to tied_grad
  Buffer tied_grad;              // comm: "tied_word.grad", head backward begin -> embedding backward begin
  bool emb_for_head = false;     // ZeRO 3, tied: the head's hook gathered the embedding unit
  std::unique_ptr<Params> params;
  std::vector<UnitShard> shards;                 // per unit (the whole unit without ZeRO)
  std::vector<Buffer> master, adam_m, adam_v;    // per unit, shard-sized under ZeRO >= 1
  Buffer dp_bucket;                              // comm: DP staging (n > 1, ZeRO 0/1)
  int64_t bucket = 0;
  bool overlap_dp = false;                       // DP buckets started during the backward
  std::unique_ptr<GradBucketReducer> reducer;    // this step's DP reduction (n > 1, ZeRO 0/1)
  std::vector<int64_t> backward_ends;            // per unit: backward passes finished this step
  std::vector<bool> held_back;                   // per unit: a tied copy summed over emb first
  Buffer send_act, recv_act, send_grad, recv_grad;  // comm: PP (p > 1)
  std::unique_ptr<StageModel> stage;
  BigramData data;

  Impl(Device& d, const ModelConfig& m, const RunConfig& r, RankContext c)
      : dev(d), model(m), run(r), ctx(c), e(r.dtype),
        g(r.dtype == DType::kFP32 ? DType::kFP32 : r.grad_dtype), data(m.vocab, r.seed) {}

  // ZeRO 3: all-gathers unit u's weights into its gathered copy (once: a
  // unit already gathered is left as it is) and points the layer at it.
  void gather(size_t u) {
    Buffer& full = params->gathered(u);
    if (!full.empty()) return;
    const UnitShard& sh = shards[u];
    full = dev.alloc(dtype_bytes(e) * sh.padded_elems(n), Account::kWeights,
                     params->layout().units[u].name + ".gathered");
    ctx.dp->all_gather(full.data(), params->weights(u).data(), sh.shard_elems, e);
    stage->rebind_layer_unit(u);
  }
  // Gathers unit u and the next `prefetch` units in the direction of the pass
  // (forward: higher indices; backward: lower), within the rank's units.
  void gather_window(size_t u, bool backward) {
    const int64_t count = static_cast<int64_t>(shards.size());
    for (int64_t k = 0; k <= prefetch; ++k) {
      const int64_t v = backward ? static_cast<int64_t>(u) - k : static_cast<int64_t>(u) + k;
      if (v < 0 || v >= count) break;
      gather(static_cast<size_t>(v));
    }
  }
  void release_all() {
    tied_grad.reset();
    emb_for_head = false;
    if (!shard_weights) return;
    for (size_t u = 0; u < shards.size(); ++u) params->gathered(u).reset();
  }
  // ZeRO 3, tied, p = 1: the head reads the embedding unit's word matrix.
  // Gathered for the head unless already gathered (the backward prefetch
  // window of the head reaching unit 0); freed at the head's end only if so.
  bool is_tied_head(size_t u) const {
    return tied_sharded && static_cast<int>(u) == params->layout().head_unit;
  }
  void gather_embedding_for_head() {
    const auto eu = static_cast<size_t>(params->layout().embedding_unit);
    emb_for_head = params->gathered(eu).empty();
    gather(eu);
  }
  void release_embedding_for_head() {
    if (emb_for_head) params->gathered(static_cast<size_t>(params->layout().embedding_unit)).reset();
    emb_for_head = false;
  }

  // One fp32 value summed over `comm` (a group of one returns it unchanged).
  double all_reduce_scalar(Comm& comm, double v) {
    if (comm.size() < 2) return v;
    float x = static_cast<float>(v);
    Buffer buf = dev.alloc(4, Account::kWorkspace, "scalar_reduce");
    if (dev.touches_memory()) dev.copy_from_host(buf.data(), &x, 4);
    comm.all_reduce(buf.data(), 1, DType::kFP32);
    if (dev.touches_memory()) dev.copy_to_host(&x, buf.data(), 4);
    return x;
  }
};

Trainer::Trainer(Device& device, const ModelConfig& model, const RunConfig& run, RankContext ctx)
    : impl_(std::make_unique<Impl>(device, model, run, ctx)) {
  Impl& I = *impl_;
  if (ctx.tp == nullptr || ctx.dp == nullptr || ctx.pp == nullptr)
    throw std::invalid_argument("Trainer: the RankContext needs tp, dp and pp communicators");
  validate_layout(ctx.layout, model, run);
  const Layout& l = ctx.layout;
  if (ctx.dp->size() != l.dp || ctx.pp->size() != l.pp || ctx.tp->size() != l.tp)
    throw std::invalid_argument("Trainer: the communicators' sizes differ from the layout");
  // (validate_layout refuses it first; kept so that the Trainer states its own limit)
  if (l.zero >= 2 && l.dp > 1 && l.pp > 1 && model.tied_embeddings)
    throw std::invalid_argument(
        "Trainer: ZeRO 2/3 with dp > 1 and pp > 1 need untied embeddings: the two stages' word "
        "gradients are summed over the embedding group after the schedule, when ZeRO 2/3 hold "
        "only shards (DeepSpeed's PipelineEngine likewise allows ZeRO <= 1 with pipelines)");
  if (model.tied_embeddings && l.pp > 1 && ctx.emb == nullptr && (ctx.first_stage() || ctx.last_stage()))
    throw std::invalid_argument("Trainer: tied embeddings with pp > 1 need the emb communicator");
  if (run.microbatches < 1 || run.mbs < 1 || run.seq < 1)
    throw std::invalid_argument("Trainer: microbatches, mbs and seq must be >= 1");
  I.n = l.dp;
  I.dp_rank = ctx.coords.dp;
  I.shard_optim = l.zero >= 1;
  I.shard_grads = l.zero >= 2 && I.n > 1;
  I.shard_weights = l.zero >= 3 && I.n > 1;
  I.prefetch = std::max<int64_t>(run.prefetch, 0);
  I.tied_sharded = I.shard_grads && model.tied_embeddings && l.pp == 1;

  I.params = std::make_unique<Params>(device, make_param_layout(model, l, ctx.coords), I.e, I.g,
                                      ParamSharding{I.shard_grads, I.shard_weights, I.n, I.dp_rank});
  const ParamLayout& pl = I.params->layout();
  for (const auto& u : pl.units) {
    I.shards.push_back(I.shard_optim ? unit_shard(u.elems, I.n, I.dp_rank) : unit_shard(u.elems, 1, 0));
    const int64_t se = I.shards.back().shard_elems;
    if (run.has_master()) I.master.push_back(device.alloc(4 * se, Account::kMaster, u.name + ".master"));
    I.adam_m.push_back(device.alloc(4 * se, Account::kOptim, u.name + ".adam_m"));
    I.adam_v.push_back(device.alloc(4 * se, Account::kOptim, u.name + ".adam_v"));
    device.fill_zero(I.adam_m.back().data(), I.adam_m.back().bytes());
    device.fill_zero(I.adam_v.back().data(), I.adam_v.back().bytes());
    if (!I.master.empty()) device.fill_zero(I.master.back().data(), I.master.back().bytes());
  }
  I.params->initialise(run.seed, model.layers, [&](size_t u, const std::vector<float>& v) {
    if (I.master.empty()) return;
    const UnitShard& s = I.shards[u];
    if (s.valid > 0) device.copy_from_host(I.master[u].data(), v.data() + s.begin, 4 * s.valid);
  });

  // comm staging (docs/exact-budget.md "Communication staging")
  if (I.n > 1 && l.zero <= 1) {
    I.bucket = bucket_elems(run.bucket_mb, dtype_bytes(I.g));
    I.overlap_dp = run.overlap_grad_reduce;
    I.dp_bucket = device.alloc(grad_bucket_staging_bytes(I.bucket, pl.total_elems(), I.overlap_dp),
                               Account::kComm, "dp.bucket");
    // Units whose gradient is summed over the embedding group after the
    // schedule (tied embeddings, p > 1) are final only then.
    I.held_back.assign(pl.units.size(), false);
    if (model.tied_embeddings && l.pp > 1 && ctx.emb != nullptr) {
      if (ctx.first_stage()) I.held_back[static_cast<size_t>(pl.embedding_unit)] = true;
      if (ctx.last_stage()) I.held_back[static_cast<size_t>(pl.head_unit)] = true;
    }
  }
  if (l.pp > 1) {
    const int64_t s_l = l.sp ? run.seq / l.tp : run.seq;
    const int64_t msg = dtype_bytes(I.e) * run.mbs * s_l * model.hidden;
    if (!ctx.last_stage()) {
      I.send_act = device.alloc(msg, Account::kComm, "pp.send_act");
      I.recv_grad = device.alloc(msg, Account::kComm, "pp.recv_grad");
    }
    if (!ctx.first_stage()) {
      I.recv_act = device.alloc(msg, Account::kComm, "pp.recv_act");
      I.send_grad = device.alloc(msg, Account::kComm, "pp.send_grad");
    }
  }
  I.stage = std::make_unique<StageModel>(device, *ctx.tp, model, run, l, ctx.coords, *I.params);
  if (I.shard_grads) {
    // ZeRO 2: a unit's full gradient lives in the staging buffer during its
    // backward; after it, summed over dp into the rank's shard (accumulating
    // over microbatches). The TP-partial gradients are summed first, on the
    // staging buffer (docs/formulas/comm.md "Sequence-partial gradients").
    Impl* ip = impl_.get();
    I.stage->backward_unit_hook = [ip](size_t u, bool begin) {
      const UnitShard& sh = ip->shards[u];
      const int64_t gb = dtype_bytes(ip->g);
      void* st = ip->params->grad_staging();
      const ParamLayout& pl = ip->params->layout();
      if (begin) {
        if (ip->shard_weights) {
          ip->gather_window(u, /*backward=*/true);
          if (ip->is_tied_head(u)) ip->gather_embedding_for_head();
        }
        ip->dev.fill_zero(st, gb * sh.padded_elems(ip->n));  // padding stays 0
        if (ip->tied_sharded && static_cast<int>(u) == pl.head_unit) {
          // the head's d(word) (StageModel::tied_word_grad), apart from the head's own gradient
          ip->tied_grad = ip->dev.alloc(gb * pl.vocab_rows * ip->model.hidden, Account::kComm,
                                        "tied_word.grad");
          ip->dev.fill_zero(ip->tied_grad.data(), ip->tied_grad.bytes());
        } else if (ip->tied_sharded && static_cast<int>(u) == pl.embedding_unit && !ip->tied_grad.empty()) {
          ip->dev.copy(ip->params->grad(u, "word.weight"), ip->tied_grad.data(), ip->tied_grad.bytes());
          ip->tied_grad.reset();
        }
        return;
      }
      ip->stage->reduce_tp_partial_grads(u, st);
      ip->ctx.dp->reduce_scatter(st, st, sh.shard_elems, ip->g);  // in place: the shard at the start
      ip->dev.accumulate(ip->params->grads(u).data(), ip->g, st, ip->g, sh.shard_elems);
      if (ip->shard_weights) {
        ip->params->gathered(u).reset();
        if (ip->is_tied_head(u)) ip->release_embedding_for_head();
      }
    };
    if (I.tied_sharded) I.stage->tied_word_grad = [ip] { return ip->tied_grad.data(); };
  }
  if (I.overlap_dp) {
    // DP overlap: after a unit's m-th backward (the step's last microbatch)
    // its gradient is final but for the TP sums, done here per unit; then the
    // buckets it completes start while the backward of the units below runs.
    Impl* ip = impl_.get();
    I.stage->backward_unit_hook = [ip](size_t u, bool begin) {
      if (!ip->reducer) return;
      if (begin) {
        ip->reducer->progress();
        return;
      }
      if (++ip->backward_ends[u] < ip->run.microbatches) return;
      if (ip->held_back[u]) return;
      ip->stage->reduce_tp_partial_grads(u, ip->params->grads(u).data());
      ip->reducer->unit_ready(u);
    };
  }
  if (I.shard_weights) {
    // ZeRO 3: a unit's weights exist whole from its all-gather (prefetch units
    // ahead) to the end of its forward; and again for its backward (a full
    // recompute runs on the backward's copy).
    Impl* ip = impl_.get();
    I.stage->forward_unit_hook = [ip](size_t u, bool begin) {
      if (begin) {
        ip->gather_window(u, /*backward=*/false);
        if (ip->is_tied_head(u)) ip->gather_embedding_for_head();
      } else {
        ip->params->gathered(u).reset();
        if (ip->is_tied_head(u)) ip->release_embedding_for_head();
      }
    };
  }
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
  const ParamLayout& pl = I.params->layout();
  if (I.n > 1 && l.zero <= 1) {
    std::vector<void*> grads;
    std::vector<int64_t> elems;
    for (size_t u = 0; u < pl.units.size(); ++u) {
      grads.push_back(I.params->grads(u).data());
      elems.push_back(pl.units[u].elems);
    }
    I.reducer = std::make_unique<GradBucketReducer>(dev, *I.ctx.dp, std::move(grads), std::move(elems), I.g,
                                                    I.bucket, I.dp_bucket.data(), I.overlap_dp);
    I.backward_ends.assign(pl.units.size(), 0);
  }

  const int64_t m = r.microbatches, b = r.mbs, s = r.seq;
  const int64_t gbs = r.global_batch(l.dp);
  const double global_tokens = static_cast<double>(r.tokens_per_step(l.dp));
  const float loss_scale = static_cast<float>(1.0 / global_tokens);
  const int64_t replica_first = I.ctx.coords.dp * m * b;
  const int64_t stage = I.ctx.coords.pp;
  const bool first = I.ctx.first_stage(), last = I.ctx.last_stage();
  const int64_t msg_elems = l.pp > 1 ? b * (l.sp ? s / l.tp : s) * I.model.hidden : 0;
  std::vector<int32_t> ids(static_cast<size_t>(b * s)), targets(static_cast<size_t>(b * s));
  double loss_sum = 0.0;
  PipeChannel chan(*I.ctx.pp, stage);
  try {
    for (const ScheduleStep& op : make_schedule(r.schedule, l.pp, stage, m)) {
      if (op.op == PipeOp::kForward) {
        const int64_t offset = replica_first + op.microbatch * b;
        if (!first) chan.recv(I.recv_act.data(), msg_elems, I.e, stage - 1);
        chan.flush();  // the forward rewrites the send buffer
        if (dev.touches_memory() && (first || last))
          I.data.batch(step_index, gbs, offset, b, s, ids.data(), targets.data());
        loss_sum += I.stage->forward(op.microbatch, step_index, offset, ids.data(), targets.data(),
                                     first ? nullptr : I.recv_act.data(),
                                     last ? nullptr : I.send_act.data());
        if (!last) chan.send(I.send_act.data(), msg_elems, I.e, stage + 1);
      } else {
        if (!last) chan.recv(I.recv_grad.data(), msg_elems, I.e, stage + 1);
        chan.flush();
        I.stage->backward(op.microbatch, loss_scale, last ? nullptr : I.recv_grad.data(),
                          first ? nullptr : I.send_grad.data());
        if (!first) chan.send(I.send_grad.data(), msg_elems, I.e, stage - 1);
      }
    }
    chan.flush();
  } catch (...) {
    // An OutOfMemory (or any failure) mid-schedule: drop the microbatches in
    // flight so the Trainer is usable again; the exception carries the ledger
    // state at the failure.
    chan.abandon();
    for (int64_t j = 0; j < m; ++j) I.stage->discard(j);
    I.release_all();
    I.reducer.reset();
    throw;
  }

  const int64_t eb = dtype_bytes(I.e), gb = dtype_bytes(I.g);
  const bool sync_emb = I.model.tied_embeddings && l.pp > 1 && I.ctx.emb != nullptr;
  if (l.tp > 1 || sync_emb || I.n > 1) dev.ledger().mark_phase("grad_sync");
  // TP-partial gradients — the sequence-partial ones under --sp and the K/V
  // rows of replicated KV heads (t > k): summed over tp once, on the
  // accumulated gradient (StageModel::reduce_tp_partial_grads). Under ZeRO 2
  // the per-unit overload runs on each unit's staging gradient instead.
  // With the DP overlap those of the units already final were summed in the
  // hook; the held-back units' are summed here.
  if (I.overlap_dp) {
    for (size_t u = 0; u < pl.units.size(); ++u)
      if (I.held_back[u]) I.stage->reduce_tp_partial_grads(u, I.params->grads(u).data());
  } else if (!I.shard_grads) {
    I.stage->reduce_tp_partial_grads();
  }
  // tied embeddings across stages: one parameter, two copies (Megatron's embedding group)
  if (sync_emb) {
    void* word = first ? I.params->grad(static_cast<size_t>(pl.embedding_unit), "word.weight")
                       : I.params->grad(static_cast<size_t>(pl.head_unit), "word_copy.weight");
    I.ctx.emb->all_reduce(word, pl.vocab_rows * I.model.hidden, I.g);
  }
  if (I.reducer) {
    I.reducer->finish();  // the held-back units (and, without overlap, every bucket)
    I.reducer.reset();
  }

  // global gradient norm: every element once over the model-parallel ranks
  double sum_sq = 0.0;
  const bool tp_lead = I.ctx.coords.tp == 0;
  // with t > k each KV head lives on t/k TP ranks (docs/exact-budget.md k_t)
  const int64_t kv_replicas = l.tp > I.model.kv_heads ? l.tp / I.model.kv_heads : 1;
  for (size_t u = 0; u < pl.units.size(); ++u) {
    // Σ of squares of unit elements [lo, hi) this rank holds the gradient of
    // (all of them, or under ZeRO 2 those in its shard)
    const UnitShard& sh = I.shards[u];
    auto squares = [&](int64_t lo, int64_t hi) {
      if (I.shard_grads) {
        lo = sh.clip_lo(lo);
        hi = sh.clip_hi(hi);
      }
      if (hi <= lo) return 0.0;
      const int64_t at = I.shard_grads ? lo - sh.begin : lo;
      return dev.sum_squares(byte_offset(I.params->grads(u).data(), gb * at), I.g, hi - lo);
    };
    for (const TensorSlot& t : pl.units[u].tensors) {
      if (t.role == "word_copy.weight") continue;            // counted on the first stage
      if (l.tp > 1 && !tp_lead && replicated_over_tp(t.role)) continue;
      if (t.row_map == RowMap::kQkv && kv_replicas > 1 && I.ctx.coords.tp % kv_replicas != 0) {
        // t > k: this rank's K and V rows are another rank's too; count its Q rows only
        sum_sq += squares(t.offset, t.offset + t.q_rows * t.cols);
        continue;
      }
      sum_sq += squares(t.offset, t.offset + t.elems());
    }
  }
  if (r.grad_clip > 0) {
    if (I.shard_grads) sum_sq = I.all_reduce_scalar(*I.ctx.dp, sum_sq);
    sum_sq = I.all_reduce_scalar(*I.ctx.tp, sum_sq);
    sum_sq = I.all_reduce_scalar(*I.ctx.pp, sum_sq);
  }
  const double norm = std::sqrt(sum_sq);
  float grad_scale = 1.0f;
  if (r.grad_clip > 0) {
    const double coef = r.grad_clip / (norm + 1e-6);
    if (coef < 1.0) grad_scale = static_cast<float>(coef);
  }

  dev.ledger().mark_phase("optimizer");
  for (size_t u = 0; u < pl.units.size(); ++u) {
    const UnitLayout& unit = pl.units[u];
    const UnitShard& sh = I.shards[u];
    // [0, decay_elems): matrices, decayed; the rest (norms, biases) not. Each
    // segment clipped to the rank's shard.
    const int64_t seg_begin[2] = {0, unit.decay_elems};
    const int64_t seg_end[2] = {unit.decay_elems, unit.elems};
    for (int k = 0; k < 2; ++k) {
      const int64_t lo = sh.clip_lo(seg_begin[k]), hi = sh.clip_hi(seg_end[k]);
      if (hi <= lo) continue;
      const int64_t loc = lo - sh.begin;  // offset in the shard-sized states
      float* master = I.master.empty() ? nullptr
                                        : static_cast<float*>(byte_offset(I.master[u].data(), 4 * loc));
      dev.adamw(master, byte_offset(I.params->weights(u).data(), eb * (I.shard_weights ? loc : lo)), I.e,
                byte_offset(I.params->grads(u).data(), gb * (I.shard_grads ? loc : lo)), I.g,
                static_cast<float*>(byte_offset(I.adam_m[u].data(), 4 * loc)),
                static_cast<float*>(byte_offset(I.adam_v[u].data(), 4 * loc)), hi - lo,
                static_cast<float>(r.lr), kBeta1, kBeta2, kAdamEps,
                k == 0 ? static_cast<float>(r.weight_decay) : 0.0f, step_index + 1, grad_scale);
    }
  }
  // ZeRO 1/2: every rank updated its shard; gather the full weights
  if (I.shard_optim && I.n > 1 && !I.shard_weights) {
    dev.ledger().mark_phase("zero.all_gather");
    for (size_t u = 0; u < pl.units.size(); ++u) {
      const UnitShard& sh = I.shards[u];
      void* w = I.params->weights(u).data();
      if (sh.padded_elems(I.n) == sh.unit_elems) {  // in place: the shard is already in its slot
        I.ctx.dp->all_gather(w, byte_offset(w, eb * sh.begin), sh.shard_elems, I.e);
      } else {  // padded: gather into a temporary, keep the first P_u elements
        Buffer full = dev.alloc(eb * sh.padded_elems(I.n), Account::kWorkspace, "zero.gather");
        Buffer mine = dev.alloc(eb * sh.shard_elems, Account::kWorkspace, "zero.shard");
        dev.fill_zero(mine.data(), mine.bytes());
        if (sh.valid > 0) dev.copy(mine.data(), byte_offset(w, eb * sh.begin), eb * sh.valid);
        I.ctx.dp->all_gather(full.data(), mine.data(), sh.shard_elems, I.e);
        dev.copy(w, full.data(), eb * sh.unit_elems);
      }
    }
  }

  // the loss of the global batch, on every rank
  double loss = loss_sum / global_tokens;
  loss = I.all_reduce_scalar(*I.ctx.dp, loss);
  loss = I.all_reduce_scalar(*I.ctx.pp, loss);
  dev.synchronize();

  StepResult res;
  res.loss = loss;
  res.grad_norm = norm;
  res.executed_flops = dev.executed_flops() - flops0;
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  res.comm_seconds = comm_seconds(I.ctx.counters) - comm0;
  res.compute_seconds = res.seconds - res.comm_seconds;
  return res;
}

std::vector<float> Trainer::parameters_fp32() const {
  // Under ZeRO 3 (n > 1) a rank holds each unit's shard only: the values of
  // unit elements [r·S_u, r·S_u + valid), unit by unit (parallel/zero/shard.h).
  const Impl& I = *impl_;
  const ParamLayout& pl = I.params->layout();
  std::vector<float> out;
  std::vector<char> tmp;
  for (size_t u = 0; u < pl.units.size(); ++u) {
    const int64_t n = I.shard_weights ? I.shards[u].valid : pl.units[u].elems;
    const size_t pos = out.size();
    out.resize(pos + static_cast<size_t>(n));
    float* dst = out.data() + pos;
    if (n == 0) continue;
    if (!I.master.empty() && !I.shard_optim) {  // the fp32 master is the parameter; the weights its rounding
      I.dev.copy_to_host(dst, I.master[u].data(), 4 * n);
    } else if (I.e == DType::kFP32) {
      I.dev.copy_to_host(dst, I.params->weights(u).data(), 4 * n);
    } else {  // 16-bit weights (under ZeRO the master holds only a shard): their values
      tmp.resize(static_cast<size_t>(n * dtype_bytes(I.e)));
      I.dev.copy_to_host(tmp.data(), I.params->weights(u).data(), static_cast<int64_t>(tmp.size()));
      convert_to_fp32(tmp.data(), I.e, dst, n);
    }
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
