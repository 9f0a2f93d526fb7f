// MoeBlock (see moe_block.h): the router, the experts, the combine, the shared
// experts, and their backward.
#include "models/moe/moe_block.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "models/linear/fp8_scope.h"
#include "models/linear/linear.h"

namespace gpuledger {
namespace {

// The host side of the routing and the combine reads and writes device
// tensors through staged fp32 copies (on meta the copies read zeros).
std::vector<float> to_host(Device& dev, const void* src, DType t, int64_t n) {
  std::vector<unsigned char> raw(static_cast<size_t>(n * dtype_bytes(t)));
  dev.copy_to_host(raw.data(), src, static_cast<int64_t>(raw.size()));
  std::vector<float> out(static_cast<size_t>(n));
  convert_to_fp32(raw.data(), t, out.data(), n);
  return out;
}

void from_host(Device& dev, void* dst, DType t, const std::vector<float>& src) {
  const auto n = static_cast<int64_t>(src.size());
  std::vector<unsigned char> raw(static_cast<size_t>(n * dtype_bytes(t)));
  convert_from_fp32(src.data(), raw.data(), t, n);
  dev.copy_from_host(dst, raw.data(), static_cast<int64_t>(raw.size()));
}

// GptOssExperts' alpha (transformers modeling_gpt_oss.py: self.alpha = 1.702), the
// sigmoid's slope in gpt-oss's clamped GLU; not a config field.
constexpr float kGptOssAlpha = 1.702f;

const char* at(const void* p, int64_t bytes) { return static_cast<const char*>(p) + bytes; }
char* at(void* p, int64_t bytes) { return static_cast<char*>(p) + bytes; }

}  // namespace

MoeBlock::MoeBlock(Device& device, const MoeShape& shape, const MoeWeights& weights, Comm* ep_comm, Comm* cp_comm)
    : dev_(device), s_(shape), w_(weights), ep_comm_(ep_comm), cp_comm_(cp_comm) {
  const auto& r = s_.routing;
  if (s_.tokens < 1 || s_.hidden < 1 || s_.expert_ffn < 1 || r.experts < 1 || r.top_k < 1 || r.top_k > r.experts)
    throw std::invalid_argument("MoeBlock: need tokens, hidden, expert_ffn >= 1 and 1 <= top_k <= experts");
  if (s_.ep < 1 || r.experts % s_.ep != 0)
    throw std::invalid_argument("MoeBlock: ep " + std::to_string(s_.ep) + " must divide the " +
                                std::to_string(r.experts) + " experts");
  if (s_.ep > 1 && (ep_comm_ == nullptr || ep_comm_->size() != s_.ep))
    throw std::invalid_argument("MoeBlock: ep " + std::to_string(s_.ep) + " needs the expert-parallel group's comm" +
                                (ep_comm_ ? " (it has " + std::to_string(ep_comm_->size()) + " ranks)" : ""));
}

double MoeBlock::forward(const void* xn, void* y, MoeSaved& sv, Account acc) {
  const int64_t n = s_.tokens, h = s_.hidden, E = s_.routing.experts;
  {  // router: logits (N × E) = xn·W_rᵀ, routed on the host
    Buffer logits = ws(n * E * eb(), "moe.router.logits");
    // Megatron's TopKRouter is a plain GEMM, not a TE module: never FP8
    const Fp8GemmScope router_gemm(Fp8Recipe::kNone);
    linear_forward(dev_, logits.data(), xn, w_.router, s_.e, n, h, E);
    if (s_.router_logit_bias) dev_.bias_add(logits.data(), w_.router_b, s_.e, n, E);
    std::vector<float> bias;  // the expert bias, read to the host where the routing runs
    if (w_.expert_bias) bias = to_host(dev_, w_.expert_bias, DType::kFP32, E);
    sv.plan = moe::route(s_.routing, to_host(dev_, logits.data(), s_.e, n * E).data(), n,
                         w_.expert_bias ? bias.data() : nullptr);
  }
  if (cp_comm_ && cp_comm_->size() > 1) aux_over_cp(sv.plan);
  sv.probs = dev_.alloc(n * E * 4, acc, "moe.router.probs");
  dev_.copy_from_host(sv.probs.data(), sv.plan.probs.data(), n * E * 4);
  dispatch_forward(xn, sv, acc);
  if (s_.ep == 1) {
    sv.out = dev_.alloc(expert_rows(sv) * h * eb(), acc, "moe.experts.out");
    experts_forward(sv, acc, sv.out.data());
  } else {
    // The experts' outputs go back to the ranks whose tokens they are.
    Buffer expert_out = dev_.alloc(expert_rows(sv) * h * eb(), Account::kComm, "moe.dispatch.expert_out");
    experts_forward(sv, acc, expert_out.data());
    sv.out = dev_.alloc(expert_rows(sv) * h * eb(), acc, "moe.experts.out");
    exchange(sv.out.data(), expert_out.data());
  }
  combine(sv, y);
  if (s_.shared_ffn > 0) shared_forward(xn, y, sv, acc);
  return sv.plan.aux_loss;
}

// The f_e counts of the microbatch: this rank's summed over the cp ranks
// (fp32, as Megatron's reduce_from_tensor_model_parallel_region sums them).
void MoeBlock::aux_over_cp(moe::RoutingPlan& plan) {
  const int64_t E = s_.routing.experts;
  std::vector<float> counts(plan.aux_counts.begin(), plan.aux_counts.end());
  Buffer buf = ws(E * 4, "moe.router.aux_counts");
  if (dev_.touches_memory()) dev_.copy_from_host(buf.data(), counts.data(), E * 4);
  cp_comm_->all_reduce(buf.data(), E, DType::kFP32);
  if (dev_.touches_memory()) dev_.copy_to_host(counts.data(), buf.data(), E * 4);
  moe::set_aux_over_ranks(s_.routing, plan, std::vector<int64_t>(counts.begin(), counts.end()),
                          s_.tokens * cp_comm_->size());
}

// sv.x = the rows the local experts process: one rank, the kept rows gathered
// by expert; under ep, this rank's tokens packed into E·C slots and exchanged.
void MoeBlock::dispatch_forward(const void* xn, MoeSaved& sv, Account acc) {
  const int64_t n = s_.tokens, h = s_.hidden, rows = expert_rows(sv);
  if (!slots()) {
    sv.row_token = dev_.alloc(rows * 4, acc, "moe.dispatch.row_token");
    dev_.copy_from_host(sv.row_token.data(), sv.plan.row_token.data(), rows * 4);
    sv.x = dev_.alloc(rows * h * eb(), acc, "moe.experts.in");
    dev_.vocab_embedding_forward(sv.x.data(), sv.row_token.as<int32_t>(), xn, s_.e, rows, h, 0, n);  // gather
    return;
  }
  // The packing runs on the host; on a device that holds no values (meta) only the buffers are booked.
  std::vector<float> packed;
  if (dev_.touches_memory()) {
    const std::vector<float> x = to_host(dev_, xn, s_.e, n * h);
    packed.assign(static_cast<size_t>(rows * h), 0.0f);  // unused slots stay zero
    for (int64_t a = 0; a < n * s_.routing.top_k; ++a) {
      const int64_t slot = out_row(sv, a);
      if (slot < 0) continue;
      const int64_t t = a / s_.routing.top_k;
      std::copy(x.begin() + t * h, x.begin() + (t + 1) * h, packed.begin() + slot * h);
    }
  }
  if (s_.ep == 1) {  // padded to capacity on one rank: the slots are the experts' input
    sv.x = dev_.alloc(rows * h * eb(), acc, "moe.experts.in");
    if (dev_.touches_memory()) from_host(dev_, sv.x.data(), s_.e, packed);
    return;
  }
  Buffer send = dev_.alloc(rows * h * eb(), Account::kComm, "moe.dispatch.send");
  if (dev_.touches_memory()) from_host(dev_, send.data(), s_.e, packed);
  sv.x = dev_.alloc(rows * h * eb(), acc, "moe.experts.in");
  exchange(sv.x.data(), send.data());
}

void MoeBlock::exchange(void* out, const void* in) {
  const int64_t per_peer = s_.routing.experts / s_.ep * moe::expert_capacity(s_.routing, s_.tokens) * s_.hidden;
  ep_comm_->all_to_all(out, in, per_peer, s_.e);
}

int64_t MoeBlock::expert_rows(const MoeSaved& sv) const {
  return !slots() ? sv.plan.kept_rows() : s_.routing.experts * moe::expert_capacity(s_.routing, s_.tokens);
}

int64_t MoeBlock::out_row(const MoeSaved& sv, int64_t choice) const {
  const int32_t row = sv.plan.row[choice];
  if (!slots() || row < 0) return row;
  // Expert e's slots are [e·C, (e+1)·C); its kept rows fill them in order.
  const int64_t ex = sv.plan.expert[choice];
  return ex * moe::expert_capacity(s_.routing, s_.tokens) + (row - sv.plan.rows_begin[ex]);
}

std::vector<MoeBlock::ExpertRows> MoeBlock::expert_row_blocks(const MoeSaved& sv) const {
  std::vector<ExpertRows> blocks;
  if (!slots()) {
    for (int64_t ex = 0; ex < s_.routing.experts; ++ex)
      if (sv.plan.rows_of(ex) > 0) blocks.push_back({sv.plan.rows_begin[ex], sv.plan.rows_of(ex), ex});
    return blocks;
  }
  // Received: ep source blocks, each E/ep local experts × C slots.
  const int64_t local = s_.routing.experts / s_.ep, c = moe::expert_capacity(s_.routing, s_.tokens);
  for (int64_t src = 0; src < s_.ep; ++src)
    for (int64_t ex = 0; ex < local; ++ex) blocks.push_back({(src * local + ex) * c, c, ex});
  return blocks;
}

void MoeBlock::experts_forward(MoeSaved& sv, Account acc, void* out) {
  const int64_t h = s_.hidden, f = s_.expert_ffn, rows = expert_rows(sv), e = eb();
  sv.gate = dev_.alloc(rows * f * e, acc, "moe.experts.gate");
  sv.up = dev_.alloc(rows * f * e, acc, "moe.experts.up");
  sv.act = dev_.alloc(rows * f * e, acc, "moe.experts.act");
  const std::vector<ExpertRows> blocks = expert_row_blocks(sv);
  for (const auto& [r0, r, ex] : blocks) {
    const int64_t w_off = ex * f * h * e;
    void* gate = at(sv.gate.data(), r0 * f * e);
    void* up = at(sv.up.data(), r0 * f * e);
    linear_forward(dev_, gate, at(sv.x.data(), r0 * h * e), at(w_.gate, w_off), s_.e, r, h, f);
    linear_forward(dev_, up, at(sv.x.data(), r0 * h * e), at(w_.up, w_off), s_.e, r, h, f);
    if (s_.expert_biases) {
      dev_.bias_add(gate, at(w_.gate_b, ex * f * e), s_.e, r, f);
      dev_.bias_add(up, at(w_.up_b, ex * f * e), s_.e, r, f);
    }
  }
  if (s_.swiglu_limit)
    dev_.swiglu_clamped_forward(sv.act.data(), sv.gate.data(), sv.up.data(), s_.e, rows * f, kGptOssAlpha,
                                *s_.swiglu_limit);
  else
    dev_.swiglu_forward(sv.act.data(), sv.gate.data(), sv.up.data(), s_.e, rows * f);
  for (const auto& [r0, r, ex] : blocks) {
    linear_forward(dev_, at(out, r0 * h * e), at(sv.act.data(), r0 * f * e), at(w_.down, ex * h * f * e), s_.e, r, f,
                   h);
    if (s_.expert_biases) dev_.bias_add(at(out, r0 * h * e), at(w_.down_b, ex * h * e), s_.e, r, h);
  }
}

void MoeBlock::combine(const MoeSaved& sv, void* y) {
  // y_t = Σ_j w_{t,j}·out[row_{t,j}] over the kept choices, summed in fp32.
  const int64_t n = s_.tokens, h = s_.hidden, k = s_.routing.top_k;
  if (!dev_.touches_memory()) return;  // meta: no values to combine
  const std::vector<float> out = to_host(dev_, sv.out.data(), s_.e, expert_rows(sv) * h);
  std::vector<float> acc(static_cast<size_t>(n * h), 0.0f);
  for (int64_t a = 0; a < n * k; ++a) {
    const int64_t row = out_row(sv, a);
    if (row < 0) continue;
    const float w = sv.plan.weight[a];
    float* dst = acc.data() + (a / k) * h;
    const float* src = out.data() + row * h;
    for (int64_t c = 0; c < h; ++c) dst[c] += w * src[c];
  }
  from_host(dev_, y, s_.e, acc);
}

void MoeBlock::shared_forward(const void* xn, void* y, MoeSaved& sv, Account acc) {
  const int64_t n = s_.tokens, h = s_.hidden, f = s_.shared_ffn, e = eb();
  sv.shared_gate = dev_.alloc(n * f * e, acc, "moe.shared.gate");
  sv.shared_up = dev_.alloc(n * f * e, acc, "moe.shared.up");
  sv.shared_act = dev_.alloc(n * f * e, acc, "moe.shared.act");
  linear_forward(dev_, sv.shared_gate.data(), xn, w_.shared_gate, s_.e, n, h, f);
  linear_forward(dev_, sv.shared_up.data(), xn, w_.shared_up, s_.e, n, h, f);
  dev_.swiglu_forward(sv.shared_act.data(), sv.shared_gate.data(), sv.shared_up.data(), s_.e, n * f);
  Buffer ys = ws(n * h * e, "moe.shared.out");
  linear_forward(dev_, ys.data(), sv.shared_act.data(), w_.shared_down, s_.e, n, f, h);
  dev_.accumulate(y, s_.e, ys.data(), s_.e, n * h);
}

void MoeBlock::backward(const void* xn, const void* dy, void* dxn, MoeSaved& sv, double aux_scale) {
  const int64_t n = s_.tokens, h = s_.hidden, rows = expert_rows(sv);
  // dxn may be dy's buffer (the layer reuses it): the shared experts read dy
  // after dxn is written, so they get a copy.
  Buffer dy_copy;
  if (dy == dxn && s_.shared_ffn > 0) {
    dy_copy = ws(n * h * eb(), "moe.dy");
    dev_.copy(dy_copy.data(), dy, n * h * eb());
    dy = dy_copy.data();
  }
  std::vector<float> dweight;
  Buffer dout = combine_backward(sv, dy, dweight);
  sv.out.reset();
  if (s_.ep > 1) {  // the outputs' gradients to the experts' ranks
    Buffer at_experts = ws(rows * h * eb(), "moe.dispatch.dout");
    exchange(at_experts.data(), dout.data());
    dout = std::move(at_experts);
  }
  Buffer dx = ws(rows * h * eb(), "moe.experts.dx");
  experts_backward(sv, dout.data(), dx.data());
  dout.reset();
  if (s_.ep > 1) {  // the inputs' gradients back to the tokens' ranks
    Buffer back = ws(rows * h * eb(), "moe.dispatch.dx");
    exchange(back.data(), dx.data());
    dx = std::move(back);
  }
  scatter_rows_backward(sv, dx.data(), dxn);
  dx.reset();
  sv.row_token.reset();
  router_backward(xn, sv, dweight, aux_scale, dxn);
  if (s_.shared_ffn > 0) shared_backward(xn, dy, dxn, sv);
  sv = MoeSaved{};
}

// dxn = Σ over a token's kept choices of its row's input gradient.
void MoeBlock::scatter_rows_backward(const MoeSaved& sv, const void* dx, void* dxn) {
  const int64_t n = s_.tokens, h = s_.hidden, k = s_.routing.top_k;
  if (!slots()) {
    dev_.fill_zero(dxn, n * h * eb());
    dev_.vocab_embedding_backward(dxn, s_.e, dx, s_.e, sv.row_token.as<int32_t>(), sv.plan.kept_rows(), h, 0, n);
    return;
  }
  if (!dev_.touches_memory()) return;  // meta: no values to add
  const std::vector<float> g = to_host(dev_, dx, s_.e, expert_rows(sv) * h);
  std::vector<float> acc(static_cast<size_t>(n * h), 0.0f);
  for (int64_t a = 0; a < n * k; ++a) {
    const int64_t slot = out_row(sv, a);
    if (slot < 0) continue;
    for (int64_t c = 0; c < h; ++c) acc[(a / k) * h + c] += g[slot * h + c];
  }
  from_host(dev_, dxn, s_.e, acc);
}

Buffer MoeBlock::combine_backward(const MoeSaved& sv, const void* dy, std::vector<float>& dweight) {
  // d out[row] = w·dy_t; d w_{t,j} = dy_t · out[row] (zero for a dropped choice)
  const int64_t n = s_.tokens, h = s_.hidden, k = s_.routing.top_k, rows = expert_rows(sv);
  Buffer d = ws(rows * h * eb(), "moe.experts.dout");
  dweight.assign(static_cast<size_t>(n * k), 0.0f);
  if (!dev_.touches_memory()) return d;  // meta: the buffer is booked, no values
  const std::vector<float> g = to_host(dev_, dy, s_.e, n * h);
  const std::vector<float> out = to_host(dev_, sv.out.data(), s_.e, rows * h);
  std::vector<float> dout(static_cast<size_t>(rows * h), 0.0f);
  for (int64_t a = 0; a < n * k; ++a) {
    const int64_t row = out_row(sv, a);
    if (row < 0) continue;
    const float w = sv.plan.weight[a];
    const float* gt = g.data() + (a / k) * h;
    double dot = 0;
    for (int64_t c = 0; c < h; ++c) {
      dout[row * h + c] = w * gt[c];
      dot += static_cast<double>(gt[c]) * out[row * h + c];
    }
    dweight[a] = static_cast<float>(dot);
  }
  from_host(dev_, d.data(), s_.e, dout);
  return d;
}

void MoeBlock::experts_backward(MoeSaved& sv, const void* dout, void* dx) {
  const int64_t h = s_.hidden, f = s_.expert_ffn, rows = expert_rows(sv), e = eb();
  const std::vector<ExpertRows> blocks = expert_row_blocks(sv);
  Buffer dact = ws(rows * f * e, "moe.experts.dact");
  const int64_t gb = dtype_bytes(s_.g);
  for (const auto& [r0, r, ex] : blocks) {
    const int64_t w_off = ex * h * f;
    if (s_.expert_biases)
      dev_.bias_backward(at(w_.d_down_b, ex * h * gb), s_.g, at(dout, r0 * h * e), s_.e, r, h, /*accumulate=*/true);
    linear_backward_weight(dev_, at(w_.d_down, w_off * dtype_bytes(s_.g)), s_.g, at(dout, r0 * h * e),
                           at(sv.act.data(), r0 * f * e), s_.e, r, f, h);
    linear_backward_data(dev_, at(dact.data(), r0 * f * e), at(dout, r0 * h * e), at(w_.down, w_off * e), s_.e, r, f,
                         h);
  }
  sv.act.reset();
  Buffer dup = ws(rows * f * e, "moe.experts.dup");
  if (s_.swiglu_limit)
    dev_.swiglu_clamped_backward(dact.data(), dup.data(), dact.data(), sv.gate.data(), sv.up.data(), s_.e, rows * f,
                                 kGptOssAlpha, *s_.swiglu_limit);
  else
    dev_.swiglu_backward(dact.data(), dup.data(), dact.data(), sv.gate.data(), sv.up.data(), s_.e, rows * f);
  sv.gate.reset();
  sv.up.reset();
  for (const auto& [r0, r, ex] : blocks) {
    const int64_t w_off = ex * f * h;
    const void* x = at(sv.x.data(), r0 * h * e);
    if (s_.expert_biases) {
      dev_.bias_backward(at(w_.d_gate_b, ex * f * gb), s_.g, at(dact.data(), r0 * f * e), s_.e, r, f, true);
      dev_.bias_backward(at(w_.d_up_b, ex * f * gb), s_.g, at(dup.data(), r0 * f * e), s_.e, r, f, true);
    }
    linear_backward_weight(dev_, at(w_.d_gate, w_off * dtype_bytes(s_.g)), s_.g, at(dact.data(), r0 * f * e), x, s_.e,
                           r, h, f);
    linear_backward_weight(dev_, at(w_.d_up, w_off * dtype_bytes(s_.g)), s_.g, at(dup.data(), r0 * f * e), x, s_.e, r,
                           h, f);
    linear_backward_data(dev_, at(dx, r0 * h * e), at(dact.data(), r0 * f * e), at(w_.gate, w_off * e), s_.e, r, h, f);
    linear_backward_data(dev_, at(dx, r0 * h * e), at(dup.data(), r0 * f * e), at(w_.up, w_off * e), s_.e, r, h, f,
                         /*beta=*/1.0f);
  }
  sv.x.reset();
}

void MoeBlock::router_backward(const void* xn, MoeSaved& sv, const std::vector<float>& dweight, double aux_scale,
                               void* dxn) {
  const int64_t n = s_.tokens, h = s_.hidden, E = s_.routing.experts;
  // The saved probabilities, read back from the device (the plan's host copy of them is what was written).
  dev_.copy_to_host(sv.plan.probs.data(), sv.probs.data(), n * E * 4);
  sv.probs.reset();
  std::vector<float> dlogits(static_cast<size_t>(n * E));
  moe::routing_backward(s_.routing, sv.plan, dweight.data(), aux_scale, dlogits.data());
  Buffer dl = ws(n * E * eb(), "moe.router.dlogits");
  from_host(dev_, dl.data(), s_.e, dlogits);
  if (s_.router_logit_bias) dev_.bias_backward(w_.d_router_b, s_.g, dl.data(), s_.e, n, E, /*accumulate=*/true);
  const Fp8GemmScope router_gemm(Fp8Recipe::kNone);  // as in the forward
  linear_backward_weight(dev_, w_.d_router, s_.g, dl.data(), xn, s_.e, n, h, E);
  linear_backward_data(dev_, dxn, dl.data(), w_.router, s_.e, n, h, E, /*beta=*/1.0f);
}

void MoeBlock::shared_backward(const void* xn, const void* dy, void* dxn, MoeSaved& sv) {
  const int64_t n = s_.tokens, h = s_.hidden, f = s_.shared_ffn, e = eb();
  linear_backward_weight(dev_, w_.d_shared_down, s_.g, dy, sv.shared_act.data(), s_.e, n, f, h);
  Buffer dact = ws(n * f * e, "moe.shared.dact");
  linear_backward_data(dev_, dact.data(), dy, w_.shared_down, s_.e, n, f, h);
  sv.shared_act.reset();
  Buffer dup = ws(n * f * e, "moe.shared.dup");
  dev_.swiglu_backward(dact.data(), dup.data(), dact.data(), sv.shared_gate.data(), sv.shared_up.data(), s_.e, n * f);
  sv.shared_gate.reset();
  sv.shared_up.reset();
  linear_backward_weight(dev_, w_.d_shared_gate, s_.g, dact.data(), xn, s_.e, n, h, f);
  linear_backward_weight(dev_, w_.d_shared_up, s_.g, dup.data(), xn, s_.e, n, h, f);
  linear_backward_data(dev_, dxn, dact.data(), w_.shared_gate, s_.e, n, h, f, /*beta=*/1.0f);
  linear_backward_data(dev_, dxn, dup.data(), w_.shared_up, s_.e, n, h, f, /*beta=*/1.0f);
}

}  // namespace gpuledger
