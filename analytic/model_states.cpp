// Model-state bytes per rank: the exact weights/grads/master/optim accounts of
// docs/exact-budget.md "Model states", and the published figures beside them
// (ZeRO paper §3.1 and §5, Megatron-LM's theoretical_memory_usage.py (megatron.h),
// DeepSpeed's estimate_zero{2,3}_model_states_mem_needs), each cited where it
// is computed.
#include "analytic/model_states.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "analytic/megatron.h"
#include "analytic/offload.h"
#include "analytic/params.h"
#include "core/checked_math.h"
#include "core/int_math.h"

namespace gpuledger::analytic {
namespace {

// Gradient bytes per element: --grad-dtype, but fp32 whenever --dtype fp32
// (docs/exact-budget.md, notation g).
int64_t grad_elem_bytes(const RunConfig& r) { return r.dtype == DType::kFP32 ? 4 : dtype_bytes(r.grad_dtype); }

// ZeRO-3: each unit's full padded buffer (e·n·⌈P_u/n⌉; under ep > 1 each
// part padded to its group, ParamUnit::padded_elems) lives from its all-gather
// to the end of its forward (backward); with --prefetch q the next q units are
// gathered ahead, so the peak adds the largest sum over 1 + q consecutive
// units in forward order (docs/exact-budget.md). Backward visits the same
// units in reverse, so its windows are the same sums.
// With tied embeddings on one stage (tied_head) the head's forward and
// backward read the embedding unit's word matrix, so the embedding unit is
// gathered for the head too: the forward set {head, embedding}, and the
// backward set of the head's window (units head − q … head) plus the
// embedding when that window does not reach it (head − q > 0). Units are in
// forward order, the embedding first and the head last.
int64_t zero3_gathered_peak_bytes(const std::vector<ParamUnit>& units, const Layout& l, int64_t e, int64_t prefetch,
                                  bool tied_head) {
  const int64_t count = static_cast<int64_t>(units.size());
  const int64_t q = std::max<int64_t>(prefetch, 0);
  auto gathered = [&](int64_t u) {
    return checked_mul(e, units[static_cast<size_t>(u)].padded_elems(l), "gathered ZeRO-3 bytes");
  };
  auto window_sum = [&](int64_t lo, int64_t hi) {  // units [lo, hi)
    int64_t sum = 0;
    for (int64_t u = lo; u < hi; ++u) sum = checked_add(sum, gathered(u), "gathered ZeRO-3 bytes");
    return sum;
  };
  int64_t best = 0;
  for (int64_t i = 0; i < count; ++i) {
    int64_t hi = i + 1;  // units [i, hi): at most 1 + q, all of unit i's chunk
    while (hi < count && hi < i + 1 + q && units[static_cast<size_t>(hi)].chunk == units[static_cast<size_t>(i)].chunk)
      ++hi;
    best = std::max(best, window_sum(i, hi));
  }
  if (tied_head && count > 1) {
    const int64_t head = count - 1, lo = std::max<int64_t>(0, head - q);
    best = std::max(best, gathered(head) + gathered(0));
    best = std::max(best, window_sum(lo, head + 1) + (lo > 0 ? gathered(0) : 0));
  }
  return best;
}

// The largest module's own parameters (DeepSpeed's "largest layer", see
// params.cpp largest_layer_params) among the units this rank holds.
int64_t largest_module_elems(const std::vector<ParamUnit>& units) {
  int64_t best = 0;
  for (const auto& u : units) {
    std::string module;
    int64_t elems = 0;
    for (const auto& t : u.tensors) {
      std::string mod = t.name.substr(0, t.name.rfind('.'));
      if (mod != module) {
        module = mod;
        elems = 0;
      }
      elems += t.elems;
      best = std::max(best, elems);
    }
  }
  return best;
}

// DeepSpeed's estimators with the optimizer offloaded (deepspeedai/DeepSpeed
// @edaa7221267243c7be7fb49c5d5f5c4fb97b4641), one node of N = dp GPUs,
// additional_buffer_factor 1.5 (their default); P = the rank's parameters
// before DP sharding. "cpu" rows are per node (every rank of the node together).
void published_offload_rows(std::vector<Published>& out, const std::vector<ParamUnit>& units, double psi, int64_t dp,
                            int zero) {
  const double n = static_cast<double>(dp);
  if (zero == 1 || zero == 2) {
    // runtime/zero/stage_1_and_2.py estimate_zero2_model_states_mem_needs, cpu_offload=True:
    // gpu_mem = 2·P; cpu_mem = P·max(4·N, 16)·1.5 (the stage_1_and_2 estimator: stages 1 and 2).
    const char* src =
        "DeepSpeed runtime/zero/stage_1_and_2.py estimate_zero2_model_states_mem_needs @edaa722, "
        "cpu_offload=True, N = dp on one node, additional_buffer_factor = 1.5: ";
    out.push_back({"deepspeed_zero2_offload_gpu", 2.0 * psi, std::string(src) + "gpu_mem = 2P"});
    out.push_back({"deepspeed_zero2_offload_cpu", std::floor(psi * std::max(4.0 * n, 16.0) * 1.5),
                   std::string(src) + "cpu_mem = int(P·max(4N, 16)·1.5), per node"});
  } else if (zero == 3) {
    // runtime/zero/stage3.py estimate_zero3_model_states_mem_needs, cpu_offload=True,
    // cpu_offload_params=False (the optimizer only), zero_init=True, one node:
    // gpu_mem = 4·largest_layer + int(2·P/N); cpu_mem = P·16·1.5.
    const double largest = static_cast<double>(largest_module_elems(units));
    const char* src =
        "DeepSpeed runtime/zero/stage3.py estimate_zero3_model_states_mem_needs @edaa722, cpu_offload=True, "
        "cpu_offload_params=False, zero_init=True, one node, additional_buffer_factor = 1.5: ";
    out.push_back({"deepspeed_zero3_offload_gpu", 4.0 * largest + std::floor(2.0 * psi / n),
                   std::string(src) + "gpu_mem = 4·largest_layer_params + int(2P/N)"});
    out.push_back({"deepspeed_zero3_offload_cpu", std::floor(psi * 16.0 * 1.5),
                   std::string(src) + "cpu_mem = int(P·16·1.5), per node"});
  }
}

}  // namespace

int64_t optimizer_state_bytes_per_param(const RunConfig& r) {
  // The state each optimizer keeps per parameter, fp32 (4 bytes each):
  // torch/optim/adamw.py exp_avg, exp_avg_sq; torch/optim/sgd.py
  // momentum_buffer (none when momentum == 0); torch/optim/adagrad.py sum;
  // Lion (Chen et al. 2023, Alg. 2) one momentum, exp_avg in lion-pytorch.
  switch (r.optimizer) {
    case OptimizerKind::kAdamW: return 8;
    case OptimizerKind::kSGD: return r.momentum != 0.0 ? 4 : 0;
    case OptimizerKind::kAdagrad: return 4;
    case OptimizerKind::kLion: return 4;
  }
  return 0;
}

double zero_paper_bytes(double psi, int zero_stage, int64_t nd, double k) {
  // Rajbhandari et al. 2020, §5 (Figure 1), K = 12 for Adam (fp32 master + m, v);
  // §3.1 defines K as the optimizer's memory multiplier:
  // baseline (2 + 2 + K)Ψ; P_os 4Ψ + KΨ/Nd; P_os+g 2Ψ + (2 + K)Ψ/Nd;
  // P_os+g+p (2 + 2 + K)Ψ/Nd.
  const double n = static_cast<double>(nd);
  switch (zero_stage) {
    case 1: return 4.0 * psi + k * psi / n;
    case 2: return 2.0 * psi + (2.0 + k) * psi / n;
    case 3: return (4.0 + k) * psi / n;
    default: return (4.0 + k) * psi;
  }
}

AccountBytes model_state_bytes(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t rank) {
  const auto units = rank_param_units(m, l, rank);
  const int64_t n = l.dp_cp();  // ZeRO's ranks: the data-parallel group with cp
  int64_t p_r = 0, s_r = 0;
  for (const auto& u : units) {
    p_r = checked_add(p_r, u.elems(), "parameters of a rank");
    s_r = checked_add(s_r, u.shard_elems(l), "parameter shard of a rank");
  }
  const int64_t e = dtype_bytes(r.dtype);
  const int64_t g = grad_elem_bytes(r);
  const int z = l.zero;

  AccountBytes b;
  // docs/exact-budget.md "Model states": weights sharded only by ZeRO 3 (plus
  // the gathered units), grads from ZeRO 2, master and optim from ZeRO 1.
  // With n = 1 a ZeRO 3 shard is the whole unit: there is no other rank to
  // gather from, so no unit is gathered and the weights are e·S_r = e·P_r.
  const int64_t gathered =
      z >= 3 && n > 1 ? zero3_gathered_peak_bytes(units, l, e, r.prefetch, m.tied_embeddings && l.pp == 1) : 0;
  b[Account::kWeights] = z >= 3 ? checked_add(checked_mul(e, s_r, "weight bytes"), gathered, "weight bytes")
                                : checked_mul(e, p_r, "weight bytes");
  b[Account::kGrads] = checked_mul(g, z >= 2 ? s_r : p_r, "gradient bytes");
  // tied embeddings, p > 1, ZeRO 2/3: the word's unit's whole gradient until its deferred reduce-scatter
  for (const auto& u : units)
    if (unit_reduced_after_schedule(m, l, u))
      b[Account::kGrads] =
          checked_add(b[Account::kGrads], checked_mul(g, u.padded_elems(l), "gradient bytes"), "gradient bytes");
  // fp32 training keeps no separate master copy: the weights are the master.
  b[Account::kMaster] = r.has_master() ? checked_mul(4, z >= 1 ? s_r : p_r, "master weight bytes") : 0;
  b[Account::kOptim] = checked_mul(optimizer_state_bytes_per_param(r), z >= 1 ? s_r : p_r, "optimizer state bytes");
  // --offload optimizer: the master and states move to host memory, with the
  // gradient and weight copies the CPU update works on (analytic/offload.h).
  if (r.offload_optimizer) {
    b[Account::kMaster] = 0;
    b[Account::kOptim] = 0;
    b[Account::kHost] = offload_host_bytes(m, l, r, rank);
  }
  return b;
}

std::vector<Published> published_model_states(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t rank) {
  const auto units = rank_param_units(m, l, rank);
  int64_t p_r = 0;
  for (const auto& u : units) p_r += u.elems();
  const double psi = static_cast<double>(p_r);  // the rank's params before DP sharding
  const int64_t nd = l.dp_cp();                 // Nd: the ranks ZeRO shards over (dp·cp with context parallelism)
  const double n = static_cast<double>(nd);
  std::vector<Published> out;

  // The paper's K: Adam's 12 (fp32 master, m, v); for another optimizer the
  // same count of its fp32 master and states, 4 + its state bytes (§3.1
  // defines K as the optimizer's memory multiplier).
  const bool adam = r.optimizer == OptimizerKind::kAdamW;
  const int64_t k = adam ? 12 : 4 + optimizer_state_bytes_per_param(r);
  const std::string k_text =
      adam ? "K = 12"
           : "K = " + std::to_string(k) + " (fp32 master + " + std::string(optimizer_name(r.optimizer)) + " state)";
  out.push_back({"mixed_precision_16psi", zero_paper_bytes(psi, 0, nd, static_cast<double>(k)),
                 std::string("Rajbhandari et al. 2020 (ZeRO), §3.1: mixed-precision ") + (adam ? "Adam" : "training") +
                     " holds 2Ψ + 2Ψ + KΨ, " + k_text + "; Ψ = this rank's parameters (" + std::to_string(p_r) + ")"});
  static const char* kRow[] = {"", "zero1", "zero2", "zero3"};
  static const char* kAdamForm[] = {"", "4Ψ + 12Ψ/Nd", "2Ψ + 14Ψ/Nd", "16Ψ/Nd"};
  static const char* kForm[] = {"", "4Ψ + KΨ/Nd", "2Ψ + (2 + K)Ψ/Nd", "(4 + K)Ψ/Nd"};
  if (l.zero >= 1 && l.zero <= 3) {
    out.push_back({kRow[l.zero], zero_paper_bytes(psi, l.zero, nd, static_cast<double>(k)),
                   std::string("Rajbhandari et al. 2020 (ZeRO), §5 / Figure 1: ") + (adam ? kAdamForm : kForm)[l.zero] +
                       ", " + k_text + (l.cp > 1 ? ", Nd = dp·cp = " : ", Nd = dp = ") + std::to_string(nd)});
  }
  // Megatron-LM's and DeepSpeed's figures below count Adam's states: given for AdamW only.
  if (!adam) return out;

  // Megatron-LM's weight+optimizer figure (analytic/megatron.h): 18 bytes per
  // parameter describes ZeRO 0 (no sharding, fp32 main grads); the
  // distributed optimizer (6 + 12/DP) shards the fp32 master and Adam states
  // over DP like ZeRO 1. Neither describes ZeRO 2 or 3, so neither is printed there.
  if (l.zero <= 1) {
    const bool distributed = l.zero == 1;
    const std::string shard = l.coords(rank).pp == 0
                                  ? "most loaded shard: ((L/p layers' TP-sharded params + embedding)/t + "
                                    "replicated norms/p)"
                                  : "other shards: (L/p layers' TP-sharded params)/t + replicated norms/p";
    out.push_back({distributed ? "megatron_distributed_optimizer" : "megatron_18",
                   megatron_weight_and_optimizer_bytes(m, l, l.coords(rank).pp, distributed,
                                                       MegatronExpertLayout{l.ep, std::nullopt}),
                   std::string("Megatron-LM megatron/training/theoretical_memory_usage.py "
                               "compute_weight_and_optimizer_memory @") +
                       kMegatronCommit + ": " +
                       (distributed ? "6 + 12/DP bytes/param (--use-distributed-optimizer), "
                                    : "18 bytes/param (bf16 weights, fp32 main grads, fp32 master, Adam m, v), ") +
                       shard + "; vocab padded to 128·t"});
  }

  // DeepSpeed (deepspeedai/DeepSpeed), GPU figure with cpu_offload=False (the
  // functions default to cpu_offload=True; the *_all_cold printers show both).
  // P = this rank's parameters, N = dp: the estimators assume pure data parallelism.
  if (l.zero == 2) {
    // runtime/zero/stage_1_and_2.py estimate_zero2_model_states_mem_needs:
    // gpu_mem = 2·P + int(18·P / N) (with offload: 2·P).
    const double v = 2.0 * psi + std::floor(18.0 * psi / n);
    out.push_back({"deepspeed_zero2", v,
                   "DeepSpeed runtime/zero/stage_1_and_2.py estimate_zero2_model_states_mem_needs, "
                   "cpu_offload=False: 2P + int(18P/N) (default cpu_offload=True gives 2P)"});
  } else if (l.zero == 3) {
    // runtime/zero/stage3.py estimate_zero3_model_states_mem_needs:
    // gpu_mem = 4·largest_layer_params + int(18·P / N) without offload
    // (defaults cpu_offload=True, cpu_offload_params=True give 4·largest_layer).
    const double largest = static_cast<double>(largest_module_elems(units));
    const double v = 4.0 * largest + std::floor(18.0 * psi / n);
    out.push_back({"deepspeed_zero3", v,
                   "DeepSpeed runtime/zero/stage3.py estimate_zero3_model_states_mem_needs, "
                   "cpu_offload=False: 4·largest_layer_params + int(18P/N); largest layer = the "
                   "largest module's own params (model_to_params) = " +
                       std::to_string(largest_module_elems(units)) +
                       " (defaults cpu_offload=cpu_offload_params=True give 4·largest_layer)"});
  }
  if (r.offload_optimizer) published_offload_rows(out, units, psi, nd, l.zero);
  return out;
}

}  // namespace gpuledger::analytic
