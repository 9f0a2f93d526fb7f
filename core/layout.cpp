// Layout: rank <-> (tp, cp, dp, pp) coordinates, the process groups as pure
// functions, and the divisibility checks a layout must pass before anything
// is allocated. Order is Megatron's RankGenerator default "tp-cp-ep-dp-pp"
// (initialize_model_parallel, megatron/core/parallel_state.py at
// d98e8a64ddf34856e74b24714e3bedb2f5a39553) without ep, tp fastest:
// rank = tp + T·(cp + C·(dp + D·pp)), so a TP group is T consecutive ranks
// (one node's NVLink domain when T <= GPUs per node) and a CP ring the next
// level out. With cp = 1 it is the "tp-dp-pp" order.
#include "core/layout.h"
#include <algorithm>

#include "core/limits.h"
#include "core/model_config.h"
#include "core/run_config.h"

namespace gpuledger {
namespace {

std::string s(int64_t v) { return std::to_string(v); }

void check_rank(const Layout& l, int64_t rank) {
  if (rank < 0 || rank >= l.world())
    throw LayoutError("rank " + s(rank) + " is outside world " + s(l.world()) + " (dp " + s(l.dp) + " × tp " + s(l.tp) +
                      " × pp " + s(l.pp) + (l.cp > 1 ? " × cp " + s(l.cp) : std::string()) + ")");
}

}  // namespace

// ---- coordinates ----

Coords Layout::coords(int64_t r) const {
  check_rank(*this, r);
  Coords c;
  c.tp = r % tp;
  c.cp = (r / tp) % cp;
  c.dp = (r / (tp * cp)) % dp;
  c.pp = r / (tp * cp * dp);
  return c;
}

int64_t Layout::rank(const Coords& c) const {
  if (c.tp < 0 || c.tp >= tp || c.dp < 0 || c.dp >= dp || c.pp < 0 || c.pp >= pp || c.cp < 0 || c.cp >= cp)
    throw LayoutError("coordinates (tp " + s(c.tp) + ", dp " + s(c.dp) + ", pp " + s(c.pp) + ", cp " + s(c.cp) +
                      ") are outside the layout (tp " + s(tp) + ", dp " + s(dp) + ", pp " + s(pp) + ", cp " + s(cp) +
                      ")");
  return c.tp + tp * (c.cp + cp * (c.dp + dp * c.pp));
}

// ---- groups: vary one coordinate, hold the others ----

namespace {

// r's group along one coordinate: that coordinate of r's set to first,
// first + step, … (count values), the others held.
std::vector<int64_t> walk(const Layout& l, int64_t r, int64_t Coords::*coordinate, int64_t first, int64_t count,
                          int64_t step = 1) {
  Coords c = l.coords(r);
  std::vector<int64_t> g;
  for (int64_t i = 0; i < count; ++i) {
    c.*coordinate = first + i * step;
    g.push_back(l.rank(c));
  }
  return g;
}

}  // namespace

std::vector<int64_t> Layout::tp_group(int64_t r) const { return walk(*this, r, &Coords::tp, 0, tp); }
std::vector<int64_t> Layout::dp_group(int64_t r) const { return walk(*this, r, &Coords::dp, 0, dp); }
std::vector<int64_t> Layout::pp_group(int64_t r) const { return walk(*this, r, &Coords::pp, 0, pp); }
std::vector<int64_t> Layout::cp_group(int64_t r) const { return walk(*this, r, &Coords::cp, 0, cp); }

// ep consecutive dp ranks (Megatron carves the expert-parallel group out of dp).
std::vector<int64_t> Layout::ep_group(int64_t r) const {
  return walk(*this, r, &Coords::dp, coords(r).dp / ep * ep, ep);
}

// The dp ranks holding the same experts: every ep-th.
std::vector<int64_t> Layout::expert_dp_group(int64_t r) const {
  return walk(*this, r, &Coords::dp, coords(r).dp % ep, dp / ep, ep);
}

// Megatron's data_parallel_group_with_cp: cp varies fastest, as in the rank order.
std::vector<int64_t> Layout::dp_cp_group(int64_t r) const {
  Coords c = coords(r);
  std::vector<int64_t> g;
  for (c.dp = 0; c.dp < dp; ++c.dp)
    for (c.cp = 0; c.cp < cp; ++c.cp) g.push_back(rank(c));
  return g;
}

// ---- context-parallel load balancing ----

CpChunks cp_token_chunks(int64_t seq, int64_t cp, int64_t cp_rank) {
  if (cp < 1 || seq < 1 || seq % (2 * cp) != 0)
    throw LayoutError("--cp " + s(cp) + ": 2·cp does not divide --seq " + s(seq) +
                      " (the sequence is cut into 2·cp equal chunks)");
  if (cp_rank < 0 || cp_rank >= cp) throw LayoutError("cp rank " + s(cp_rank) + " is outside --cp " + s(cp));
  return CpChunks{.first = cp_rank, .second = 2 * cp - 1 - cp_rank, .chunk_tokens = seq / (2 * cp)};
}

int64_t cp_global_position(const CpChunks& c, int64_t i) {
  if (i < 0 || i >= 2 * c.chunk_tokens)
    throw LayoutError("local token " + s(i) + " is outside the rank's " + s(2 * c.chunk_tokens) + " tokens");
  return i < c.chunk_tokens ? c.first * c.chunk_tokens + i : c.second * c.chunk_tokens + (i - c.chunk_tokens);
}

void cp_local_tokens(const CpChunks& c, int64_t count, int64_t seq, const int32_t* tokens, int32_t* local) {
  const int64_t n = c.chunk_tokens;
  for (int64_t b = 0; b < count; ++b) {
    const int32_t* row = tokens + b * seq;
    std::copy(row + c.first * n, row + (c.first + 1) * n, local + b * 2 * n);
    std::copy(row + c.second * n, row + (c.second + 1) * n, local + b * 2 * n + n);
  }
}

// ---- validation ----

namespace {
// Interleaved pipelines (--vpp), as Megatron-LM refuses them
// (megatron/training/arguments.py and megatron/core/pipeline_parallel/
// schedules.py at d98e8a64ddf34856e74b24714e3bedb2f5a39553): equal chunks of
// L/(p·v) layers, m a multiple of p (the microbatch groups of p), p > 1. Our
// own limit: the 1f1b schedule only (interleaving is a 1F1B schedule). ZeRO
// 2/3 stage and gather unit by unit, each model chunk's units in its own pass
// (ZeRO 3's prefetch stays inside the chunk: parallel/zero/param_gather.h).
void check_virtual_stages(const Layout& l, const ModelConfig& m, const RunConfig& r) {
  if (l.vpp < 1) throw LayoutError("--vpp must be >= 1, got " + s(l.vpp));
  if (l.vpp == 1) return;
  if (l.vpp > limits::kMaxWorld) throw LayoutError("--vpp " + s(l.vpp) + " is above the limit " + s(limits::kMaxWorld));
  if (l.pp < 2) throw LayoutError("--vpp " + s(l.vpp) + " needs --pp > 1 (virtual stages interleave pipeline ranks)");
  if (m.layers % (l.pp * l.vpp) != 0)
    throw LayoutError("--pp " + s(l.pp) + " · --vpp " + s(l.vpp) + " does not divide layers " + s(m.layers) + " (" +
                      m.name + "): every model chunk holds layers / (pp·vpp) layers");
  if (r.microbatches % l.pp != 0)
    throw LayoutError("--vpp " + s(l.vpp) + " needs --microbatches a multiple of --pp " + s(l.pp) + ", got " +
                      s(r.microbatches) + " (Megatron's interleaved schedule runs microbatches in groups of pp)");
  if (r.schedule != Schedule::k1F1B)
    throw LayoutError("--vpp " + s(l.vpp) + " needs --schedule 1f1b (the interleaved schedule is a 1F1B schedule)");
}
// Expert parallelism (--ep): Megatron-LM carves the ep groups out of the dp
// ranks (parallel_state.py at d98e8a64: the expert layout's
// world = etp·ep·edp·pp), so ep divides dp; each rank holds E/ep experts.
// Not built here with tensor parallelism or interleaved stages (each
// pipeline stage has its own ep groups: the same pp coordinate).
void check_expert_parallel(const Layout& l, const ModelConfig& m) {
  if (l.ep < 1) throw LayoutError("--ep must be >= 1, got " + s(l.ep));
  if (l.ep == 1) return;
  if (l.ep > limits::kMaxWorld) throw LayoutError("--ep " + s(l.ep) + " is above the limit " + s(limits::kMaxWorld));
  if (!m.is_moe()) throw LayoutError("--ep " + s(l.ep) + " needs a mixture-of-experts model; " + m.name + " is dense");
  if (l.dp % l.ep != 0)
    throw LayoutError("--ep " + s(l.ep) + " does not divide --dp " + s(l.dp) +
                      " (the expert-parallel groups are carved out of the data-parallel ranks)");
  if (m.num_experts % l.ep != 0)
    throw LayoutError("--ep " + s(l.ep) + " does not divide the " + s(m.num_experts) + " experts of " + m.name +
                      " (each rank holds experts / ep)");
  if (l.tp > 1)
    throw LayoutError("--ep " + s(l.ep) + " with --tp " + s(l.tp) + ": expert parallelism is built with tp = 1 only");
}

// Context parallelism: the 2·cp load-balanced chunks must divide the sequence
// (Megatron asserts seq % (2·cp) == 0 in get_batch_on_this_cp_rank). Our own
// limit: a MoE model with cp > 1 runs at ep 1. Pipeline stages (and virtual
// stages) each run the ring over their own cp group; tensor-parallel ranks
// each run it on their K/V heads (the cp group holds tp), and sequence
// parallelism shards the rank's s/cp tokens (checked in validate_layout).
void check_context_parallel(const Layout& l, const ModelConfig& m, const RunConfig& r) {
  if (l.cp == 1) return;
  if (r.seq % (2 * l.cp) != 0)
    throw LayoutError("--cp " + s(l.cp) + ": 2·cp = " + s(2 * l.cp) + " does not divide --seq " + s(r.seq) +
                      " (the sequence is cut into 2·cp equal chunks for causal load balancing)");
  // A MoE model routes each cp rank's tokens there (routing is per token);
  // its expert-parallel groups are carved out of dp without cp (ep_group).
  if (m.num_experts > 0 && l.ep > 1)
    throw LayoutError("--cp " + s(l.cp) + " with --ep " + s(l.ep) + ": a MoE model runs context parallelism with ep 1");
  // The ring merges each visiting block's partial output by its log-sum-exp:
  // a flash core (TransformerEngine's context parallelism runs flash or fused
  // attention only). ZeRO shards over the dp·cp ranks (Layout::dp_cp).
  if (r.attention != AttentionKind::kFlash)
    throw LayoutError("--cp " + s(l.cp) + " needs --attention flash (ring attention merges flash blocks)");
}
}  // namespace

void validate_layout(const Layout& l, const ModelConfig& m, const RunConfig& r) {
  const std::string who = " (" + m.name + ")";
  if (l.dp < 1) throw LayoutError("--dp must be >= 1, got " + s(l.dp));
  if (l.tp < 1) throw LayoutError("--tp must be >= 1, got " + s(l.tp));
  if (l.pp < 1) throw LayoutError("--pp must be >= 1, got " + s(l.pp));
  if (l.cp < 1) throw LayoutError("--cp must be >= 1, got " + s(l.cp));  // before cp enters the world's product
  if (l.zero < 0 || l.zero > 3) throw LayoutError("--zero must be 0, 1, 2 or 3, got " + s(l.zero));
  if (r.mbs < 1) throw LayoutError("--mbs must be >= 1, got " + s(r.mbs));
  if (r.seq < 1) throw LayoutError("--seq must be >= 1, got " + s(r.seq));
  if (r.microbatches < 1) throw LayoutError("--microbatches must be >= 1, got " + s(r.microbatches));
  // DeepSpeed's offload_optimizer is an option of ZeRO stages 1-3: the host holds the rank's shard.
  if (r.offload_optimizer && l.zero < 1)
    throw LayoutError(
        "--offload optimizer needs --zero 1, 2 or 3 (the rank offloads its optimizer shard), got --zero " + s(l.zero));
  if (!(r.dropout >= 0.0 && r.dropout < 1.0))
    throw LayoutError("--dropout must be in [0, 1), got " + std::to_string(r.dropout));
  // The stated limits (core/limits.h), checked before any product is formed.
  auto at_most = [](const char* option, int64_t v, int64_t limit) {
    if (v > limit) throw LayoutError(std::string(option) + " " + s(v) + " is above the limit " + s(limit));
  };
  at_most("--dp", l.dp, limits::kMaxWorld);
  at_most("--tp", l.tp, limits::kMaxWorld);
  at_most("--pp", l.pp, limits::kMaxWorld);
  at_most("--cp", l.cp, limits::kMaxWorld);
  at_most("world = dp·tp·pp", l.dp * l.tp * l.pp, limits::kMaxWorld);  // each <= 2^20: the product fits
  at_most("world = dp·tp·pp·cp", (l.dp * l.tp * l.pp) * l.cp, limits::kMaxWorld);
  at_most("--seq", r.seq, limits::kMaxTokens);
  at_most("--mbs", r.mbs, limits::kMaxBatch);
  at_most("--microbatches", r.microbatches, limits::kMaxBatch);

  // Megatron TP: attention heads are split across the TP group.
  if (m.heads % l.tp != 0) throw LayoutError("--tp " + s(l.tp) + " does not divide heads " + s(m.heads) + who);
  // KV heads split when t <= k, replicated t/k times when t > k
  // (docs/exact-budget.md, k_t).
  if (m.kv_heads % l.tp != 0 && l.tp % m.kv_heads != 0)
    throw LayoutError("--tp " + s(l.tp) + " neither divides kv_heads " + s(m.kv_heads) + " nor is a multiple of it" +
                      who);
  // Column-parallel MLP-in / row-parallel MLP-out split ffn.
  if (m.ffn % l.tp != 0) throw LayoutError("--tp " + s(l.tp) + " does not divide ffn " + s(m.ffn) + who);
  // Contiguous, equal pipeline stages of >= 1 layer.
  if (m.layers < l.pp)
    throw LayoutError("--pp " + s(l.pp) + " exceeds layers " + s(m.layers) + who +
                      ": every stage needs at least one layer");
  check_virtual_stages(l, m, r);
  check_expert_parallel(l, m);
  check_context_parallel(l, m, r);
  // Sequence parallelism shards the sequence over the TP group: the rank's
  // s/cp tokens under context parallelism (Megatron's get_tensor_shapes:
  // seq_length / cp / tp).
  if (l.sp && l.tp > 1 && l.cp == 1 && r.seq % l.tp != 0)
    throw LayoutError("--tp " + s(l.tp) + " does not divide --seq " + s(r.seq) + " (required by --sp)");
  if (l.sp && l.tp > 1 && l.cp > 1 && (r.seq / l.cp) % l.tp != 0)
    throw LayoutError("--tp " + s(l.tp) + " does not divide the rank's --seq " + s(r.seq) + " / --cp " + s(l.cp) +
                      " = " + s(r.seq / l.cp) + " tokens (required by --sp)");
  // gpt has max_seq learned positions: no position beyond them exists.
  if (m.is_gpt() && r.seq > m.max_seq)
    throw LayoutError("--seq " + s(r.seq) + " exceeds max_seq " + s(m.max_seq) + " learned positions" + who);
}

// ---- pipeline stages ----

int64_t layers_on_stage(const ModelConfig& m, const Layout& l, int64_t stage) {
  if (l.pp < 1 || m.layers < l.pp)
    throw LayoutError("--pp " + s(l.pp) + " exceeds layers " + s(m.layers) + " (" + m.name +
                      "): every stage needs at least one layer");
  if (stage < 0 || stage >= l.pp) throw LayoutError("stage " + s(stage) + " is outside --pp " + s(l.pp));
  // Contiguous stages of L / p layers. When p does not divide L, the stages at
  // the ends hold one layer fewer — first, last, second, second-to-last, … —
  // as Meta balanced Llama 3 405B's 126 layers over 16 stages (Llama 3 paper,
  // §3.3.2: "we reduce one Transformer layer each from the first and the last
  // stages"); the first and last stages also carry the embedding and the head.
  const int64_t base = m.layers / l.pp, rem = m.layers % l.pp;
  if (rem == 0) return base;
  const int64_t shorter = l.pp - rem;  // stages holding `base`
  const int64_t from_end = std::min(stage, l.pp - 1 - stage);
  const int64_t order = 2 * from_end + (stage <= l.pp - 1 - stage ? 0 : 1);
  return order < shorter ? base : base + 1;
}

int64_t layers_per_chunk(const ModelConfig& m, const Layout& l, int64_t stage) {
  if (l.vpp == 1) return layers_on_stage(m, l, stage);
  if (l.vpp < 1 || l.pp < 1 || m.layers % (l.pp * l.vpp) != 0)
    throw LayoutError("--pp " + s(l.pp) + " · --vpp " + s(l.vpp) + " does not divide layers " + s(m.layers));
  return m.layers / (l.pp * l.vpp);
}

int64_t first_layer_of_chunk(const ModelConfig& m, const Layout& l, int64_t stage, int64_t chunk) {
  if (chunk < 0 || chunk >= l.vpp) throw LayoutError("chunk " + s(chunk) + " is outside --vpp " + s(l.vpp));
  if (l.vpp == 1) return first_layer_of_stage(m, l, stage);
  // Megatron's get_transformer_layer_offset (megatron/core/transformer/
  // transformer_layer.py at d98e8a64ddf34856e74b24714e3bedb2f5a39553), even
  // split: offset = vp_stage·(L/v) + pp_rank·(L/v/p) = (c·p + r)·L/(p·v).
  return (chunk * l.pp + stage) * layers_per_chunk(m, l, stage);
}

int64_t first_layer_of_stage(const ModelConfig& m, const Layout& l, int64_t stage) {
  int64_t first = 0;
  for (int64_t i = 0; i < stage; ++i) first += layers_on_stage(m, l, i);
  return first;
}

int64_t kv_heads_on_rank(int64_t kv_heads, int64_t tp) {
  if (tp < 1) throw std::invalid_argument("tp must be >= 1, got " + std::to_string(tp));
  if (tp <= kv_heads) {
    if (kv_heads % tp != 0)
      throw std::invalid_argument(std::to_string(kv_heads) + " KV heads do not split over tp " + std::to_string(tp));
    return kv_heads / tp;
  }
  if (tp % kv_heads != 0)
    throw std::invalid_argument("tp " + std::to_string(tp) + " is not a multiple of " + std::to_string(kv_heads) +
                                " KV heads (replication)");
  return 1;
}

}  // namespace gpuledger
