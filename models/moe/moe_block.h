// The sparse MLP of a mixture-of-experts layer on one rank, all experts local
// (docs/formulas/moe.md), written against Device only:
//
//   xn ─ router GEMM (h → E) (+ bias) ─ softmax, top-k, capacity (host, moe_routing.h)
//   xn ─ gather rows by expert (Device::vocab_embedding_forward on the row → token table)
//      ─ per expert e: SwiGLU FFN on its rows (gate, up: h → f_e; down: f_e → h; each + bias
//        with expert_biases) via Device::gemm
//      ─ combine: y_t = Σ_j w_{t,j}·out[row_{t,j}] (host)   [+ the shared experts' SwiGLU on every token]
//
// Backward runs through all of it: the combine (the expert outputs' and the
// weights' gradients), the experts, the scatter-add of the rows' input
// gradients (Device::vocab_embedding_backward), the top-k weights and the
// softmax to the router logits together with the load-balancing loss's
// gradient, and the router GEMM.
//
// Weights (the parameter layout's "moe.*" tensors, analytic/params.cpp): router
// (E × h); experts' gate and up (E stacked f_e × h), down (E stacked h × f_e);
// shared gate, up (f_s·S × h), down (h × f_s·S): S shared experts of inner
// size f_s are one SwiGLU FFN of inner size S·f_s (the down projection sums
// them), un-gated as DeepSeek-MoE's.
//
// Saved for the backward (account `acc`, docs/formulas/moe.md "Activations";
// A = the kept rows, N·k less the dropped choices):
//   moe.router.probs      N·E fp32
//   moe.dispatch.row_token A int32
//   moe.experts.in        A·h   e   (the gathered rows)
//   moe.experts.gate, .up, .act  A·f_e e each
//   moe.experts.out       A·h   e   (for the combine weights' gradient)
//   moe.shared.gate, .up, .act   N·S·f_s e each (shared experts only)
// The routing choices (expert, row, weight per token and choice) stay on the
// host in MoeSaved::plan: the combine runs on the host, on staged copies.
// The block's input xn is the caller's saved tensor (the layer's norm-2 output).
//
// Expert parallelism (shape.ep > 1, with the expert-parallel group's Comm):
// this rank holds experts [r·E/ep, (r+1)·E/ep) (r = its rank in the group;
// the expert weights and gradients passed are those E/ep experts), routes its
// own N tokens with the full router, and exchanges fixed-size buffers so that
// every all-to-all has equal splits (docs/formulas/moe.md "Expert
// parallelism"): each expert has C = ⌈c·N·k/E⌉ slots per source rank (no
// capacity factor: C = N), its kept rows in slot order, the unused slots zero.
//   forward:  pack (E·C × h, account comm "moe.dispatch.send") ─ all-to-all ─
//             moe.experts.in (ep source blocks of E/ep experts × C slots) ─
//             the experts on every slot (padding included, as Megatron-LM's
//             --moe-pad-expert-input-to-capacity) ─ all-to-all ─
//             moe.experts.out (this rank's E·C slots back, saved for the
//             combine's weight gradient) ─ combine
//   backward: the combine's gradient ─ all-to-all ─ the experts' backward ─
//             all-to-all ─ the scatter-add onto the tokens (host)
// Saved per block: probs N·E·4, experts.in and experts.out E·C·h·e each,
// gate, up, act E·C·f_e·e each; no row → token table (the host plan maps slots).
// With pad_to_capacity on one rank the same slots and saved tensors, without
// the exchanges (and their comm buffers).
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "comm/comm.h"
#include "kernels/device.h"
#include "models/moe/moe_routing.h"

namespace gpuledger {

struct MoeShape {
  int64_t tokens = 0;      // N = b·s
  int64_t hidden = 0;      // h
  int64_t expert_ffn = 0;  // f_e
  int64_t shared_ffn = 0;  // S·f_s (0: no shared experts)
  moe::RoutingConfig routing;
  int64_t ep = 1;  // expert-parallel group size (E % ep == 0); > 1 needs the group's Comm
  // One rank (ep = 1): the experts still work on the E·C capacity slots, as
  // under ep (Megatron-LM's --moe-pad-expert-input-to-capacity), so that the
  // saved bytes and FLOPs do not depend on the routing; the training step
  // sets it when the model has a capacity factor.
  bool pad_to_capacity = false;
  // gpt-oss (ModelConfig::router_logit_bias, expert_biases): a bias on the
  // router's logits; biases on each routed expert's gate, up and down outputs
  // (MoeWeights::router_b, gate_b, up_b, down_b). A padding slot's rows get the
  // biases too, but their outputs are never combined, so their gradients are 0.
  bool router_logit_bias = false, expert_biases = false;
  // gpt-oss's clamped GLU in the routed experts (Device::swiglu_clamped_forward
  // with GptOssExperts' alpha 1.702 and this limit); none: SwiGLU.
  std::optional<float> swiglu_limit;
  DType e = DType::kBF16;  // activations and weights
  DType g = DType::kBF16;  // gradients
};

struct MoeWeights {
  const void *router = nullptr, *gate = nullptr, *up = nullptr, *down = nullptr;
  const void *shared_gate = nullptr, *shared_up = nullptr, *shared_down = nullptr;
  void *d_router = nullptr, *d_gate = nullptr, *d_up = nullptr, *d_down = nullptr;
  void *d_shared_gate = nullptr, *d_shared_up = nullptr, *d_shared_down = nullptr;
  const float* expert_bias = nullptr;  // E fp32 (router_bias: the top k by score + bias, expert_bias.h); null: none
  // gpt-oss's biases (MoeShape::biases): the router's on its E logits; each
  // routed expert's on gate and up (E stacked f_e), down (E stacked h).
  const void *router_b = nullptr, *gate_b = nullptr, *up_b = nullptr, *down_b = nullptr;
  void *d_router_b = nullptr, *d_gate_b = nullptr, *d_up_b = nullptr, *d_down_b = nullptr;
};

struct MoeSaved {
  moe::RoutingPlan plan;
  Buffer probs, row_token, x, gate, up, act, out;
  Buffer shared_gate, shared_up, shared_act;
};

class MoeBlock {
 public:
  // ep_comm: the expert-parallel group (size shape.ep), needed when shape.ep > 1.
  // cp_comm: the context-parallel ring's group when the microbatch's tokens
  // are split over cp > 1 ranks: the load-balancing loss's f_e counts are
  // summed over it, one all-reduce of E fp32 per forward (moe_routing.h
  // set_aux_over_ranks); null: the block holds the microbatch's every token.
  MoeBlock(Device& device, const MoeShape& shape, const MoeWeights& weights, Comm* ep_comm = nullptr,
           Comm* cp_comm = nullptr);

  // y (N × h, e) = the block's output for xn (N × h, e); `saved` receives what
  // backward needs, booked under `acc`. Returns the load-balancing loss
  // (α·E·Σ f_e·P_e, already times α).
  double forward(const void* xn, void* y, MoeSaved& saved, Account acc);
  // dxn (N × h, e) = d(loss)/d(xn) given dy (dxn may be dy's buffer);
  // accumulates the weight gradients.
  // aux_scale = d(loss)/d(aux loss) (the scale the caller gives the main loss).
  // Frees `saved`.
  void backward(const void* xn, const void* dy, void* dxn, MoeSaved& saved, double aux_scale);

  const MoeShape& shape() const { return s_; }

 private:
  // One GEMM group of the experts: `rows` rows from `row0` of the expert
  // buffers, through local expert `expert` (its index in the weights given).
  struct ExpertRows {
    int64_t row0, rows, expert;
  };
  std::vector<ExpertRows> expert_row_blocks(const MoeSaved& sv) const;
  int64_t expert_rows(const MoeSaved& sv) const;              // A one rank, E·C under ep
  int64_t out_row(const MoeSaved& sv, int64_t choice) const;  // the choice's row of sv.out, −1 dropped
  void dispatch_forward(const void* xn, MoeSaved& sv, Account acc);
  void experts_forward(MoeSaved& sv, Account acc, void* out);
  void experts_backward(MoeSaved& sv, const void* dout, void* dx);
  void exchange(void* out, const void* in);  // one all-to-all of the E·C slots
  void scatter_rows_backward(const MoeSaved& sv, const void* dx, void* dxn);
  void shared_forward(const void* xn, void* y, MoeSaved& sv, Account acc);
  void shared_backward(const void* xn, const void* dy, void* dxn, MoeSaved& sv);
  void combine(const MoeSaved& sv, void* y);
  Buffer combine_backward(const MoeSaved& sv, const void* dy, std::vector<float>& dweight);
  void router_backward(const void* xn, MoeSaved& sv, const std::vector<float>& dweight, double aux_scale, void* dxn);
  Buffer ws(int64_t bytes, const char* what) { return dev_.alloc(bytes, Account::kWorkspace, what); }
  int64_t eb() const { return dtype_bytes(s_.e); }
  // The experts work on E·C fixed slots (ep > 1 or pad_to_capacity), not on the A kept rows.
  bool slots() const { return s_.ep > 1 || s_.pad_to_capacity; }

  Device& dev_;
  MoeShape s_;
  MoeWeights w_;
  Comm* ep_comm_ = nullptr;
  Comm* cp_comm_ = nullptr;
  void aux_over_cp(moe::RoutingPlan& plan);
};

}  // namespace gpuledger
