// The per-element update of each optimizer, in fp32 — one definition shared by
// the CPU backend (kernels/cpu/ops_optim.cpp) and the CUDA kernels
// (kernels/cuda/ops_optim.cu), so that both run the same arithmetic in the
// same order. p is the fp32 parameter (the master copy, or fp32 weights), g
// the gradient already multiplied by the clipping scale, wd the step's weight
// decay (the caller passes 0 for norms and biases), s1/s2 the rule's fp32
// states (zero before the first step; null when the rule keeps fewer). Each
// returns the new p.
//
// AdamW (Loshchilov & Hutter 2019, Alg. 2; Adam's bias correction, Kingma & Ba
// 2015, Alg. 1):
//   m = β1·m + (1 − β1)·g,  v = β2·v + (1 − β2)·g²
//   p −= lr·(m/(1 − β1^t) / (√(v/(1 − β2^t)) + ε) + wd·p)
// SGD with momentum μ, dampening 0, no Nesterov (PyTorch 2.15.0
// torch/optim/sgd.py _single_tensor_sgd): g += wd·p;  b = μ·b + g;  p −= lr·b. PyTorch's first
// step sets b = g, which μ·0 + g is exactly; with μ = 0 there is no buffer and
// p −= lr·g.
// Adagrad, lr_decay 0, initial accumulator 0 (PyTorch 2.15.0
// torch/optim/adagrad.py _single_tensor_adagrad): g += wd·p;  s += g²;  p −= lr·g / (√s + ε).
// Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms",
// Alg. 2; lucidrains/lion-pytorch lion_pytorch/lion_pytorch.py update_fn @6a74fdc): p ·= 1 − lr·wd;
// p −= lr·sign(β1·m + (1 − β1)·g);  m = β2·m + (1 − β2)·g  (sign(0) = 0, as
// torch.sign).
#pragma once
#include <cmath>

#include "core/host_device.h"
#include "kernels/device.h"

namespace gpuledger {

template <OptimizerKind K>
GPL_HOST_DEVICE float optimizer_element(const OptimizerStep& u, float p, float g, float* s1, float* s2) {
  const OptimizerHyper& h = u.hyper;
  const float wd = h.weight_decay;
  if constexpr (K == OptimizerKind::kAdamW) {
    const float m = h.beta1 * *s1 + (1.0f - h.beta1) * g;
    const float v = h.beta2 * *s2 + (1.0f - h.beta2) * g * g;
    *s1 = m;
    *s2 = v;
    const float mhat = m / u.bias_correction1, vhat = v / u.bias_correction2;
    return p - h.lr * (mhat / (sqrtf(vhat) + h.eps) + wd * p);
  } else if constexpr (K == OptimizerKind::kSGD) {
    const float d = g + wd * p;
    if (s1 == nullptr) return p - h.lr * d;
    const float b = h.momentum * *s1 + d;
    *s1 = b;
    return p - h.lr * b;
  } else if constexpr (K == OptimizerKind::kAdagrad) {
    const float d = g + wd * p;
    const float s = *s1 + d * d;
    *s1 = s;
    return p - h.lr * (d / (sqrtf(s) + h.eps));
  } else {
    static_assert(K == OptimizerKind::kLion);
    const float m = *s1;
    const float c = h.beta1 * m + (1.0f - h.beta1) * g;
    const float sign = static_cast<float>((c > 0.0f) - (c < 0.0f));
    *s1 = h.beta2 * m + (1.0f - h.beta2) * g;
    return p * (1.0f - h.lr * wd) - h.lr * sign;
  }
}

// Calls f.template operator()<K>() with the run-time kind as the template
// argument K: a backend picks its loop or kernel once per call, not per element.
template <class F>
void dispatch_optimizer(OptimizerKind kind, F&& f) {
  switch (kind) {
    case OptimizerKind::kAdamW: f.template operator()<OptimizerKind::kAdamW>(); return;
    case OptimizerKind::kSGD: f.template operator()<OptimizerKind::kSGD>(); return;
    case OptimizerKind::kAdagrad: f.template operator()<OptimizerKind::kAdagrad>(); return;
    case OptimizerKind::kLion: f.template operator()<OptimizerKind::kLion>(); return;
  }
}

}  // namespace gpuledger
