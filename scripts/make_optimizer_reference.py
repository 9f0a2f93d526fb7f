#!/usr/bin/env python3
"""Writes tests/data/optimizer_reference.json: a few steps of PyTorch's own
optimizers on small fp32 tensors, the outside reference the CPU optimizer
kernel is held to (tests/kernels/test_optimizer_reference.cpp).

  torch.optim.SGD      momentum 0.9 (and 0), dampening 0, nesterov off, weight decay
  torch.optim.Adagrad  lr_decay 0, initial_accumulator_value 0, eps, weight decay
  torch.optim.AdamW    betas (0.9, 0.95), eps 1e-8, decoupled weight decay
  Lion                 written here from Chen et al. 2023, "Symbolic Discovery of
                       Optimization Algorithms", Alg. 2 (as lucidrains/lion-pytorch's
                       update_fn): p *= 1 - lr*wd; p -= lr*sign(b1*m + (1-b1)*g);
                       m = b2*m + (1-b2)*g

Each case: the fp32 parameters before the first step, the gradients of each
step, and the parameters and the optimizer's state after each step. Every
number is an fp32 value written exactly (a double that is an fp32).

Needs torch (not in CI); run by hand and commit the output:
  python3 scripts/make_optimizer_reference.py
"""
import json
import pathlib

import torch

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "optimizer_reference.json"
N, STEPS, SEED = 16, 4, 20261201


def lion_step(params, grads, exp_avg, lr, beta1, beta2, weight_decay):
    with torch.no_grad():
        params.mul_(1.0 - lr * weight_decay)
        update = exp_avg.clone().mul_(beta1).add(grads, alpha=1.0 - beta1).sign_()
        params.add_(update, alpha=-lr)
        exp_avg.mul_(beta2).add_(grads, alpha=1.0 - beta2)


def run_case(case, gen):
    p0 = torch.randn(N, generator=gen, dtype=torch.float32)
    grads = [torch.randn(N, generator=gen, dtype=torch.float32) * 0.5 for _ in range(STEPS)]
    # A few exact zeros: sign(0) = 0 for Lion, and a zero sum start for Adagrad's sqrt.
    for g in grads:
        g[3] = 0.0
    param = torch.nn.Parameter(p0.clone())
    kind, lr, wd = case["optimizer"], case["lr"], case["weight_decay"]
    if kind == "sgd":
        opt = torch.optim.SGD([param], lr=lr, momentum=case["momentum"], dampening=0, nesterov=False,
                              weight_decay=wd)
        names = ["momentum_buffer"] if case["momentum"] != 0 else []
    elif kind == "adagrad":
        opt = torch.optim.Adagrad([param], lr=lr, lr_decay=0, weight_decay=wd, initial_accumulator_value=0,
                                  eps=case["eps"])
        names = ["sum"]
    elif kind == "adamw":
        opt = torch.optim.AdamW([param], lr=lr, betas=(case["beta1"], case["beta2"]), eps=case["eps"],
                                weight_decay=wd)
        names = ["exp_avg", "exp_avg_sq"]
    else:
        opt, names = None, ["exp_avg"]
        exp_avg = torch.zeros(N, dtype=torch.float32)
    params_after, states_after = [], []
    for g in grads:
        if opt is not None:
            param.grad = g.clone()
            opt.step()
            state = [opt.state[param][k].clone() for k in names]
        else:
            lion_step(param.data, g, exp_avg, lr, case["beta1"], case["beta2"], wd)
            state = [exp_avg.clone()]
        params_after.append(param.detach().clone())
        states_after.append(state)
    as_list = lambda t: [float(x) for x in t.tolist()]
    return dict(case, params0=as_list(p0), grads=[as_list(g) for g in grads],
                params=[as_list(p) for p in params_after],
                states=[[as_list(s) for s in st] for st in states_after], state_names=names)


def main():
    gen = torch.Generator().manual_seed(SEED)
    cases = [
        {"optimizer": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 0.01},
        {"optimizer": "sgd", "lr": 0.1, "momentum": 0.0, "weight_decay": 0.01},
        {"optimizer": "adagrad", "lr": 0.1, "eps": 1e-10, "weight_decay": 0.01},
        {"optimizer": "lion", "lr": 0.01, "beta1": 0.9, "beta2": 0.99, "weight_decay": 0.1},
        {"optimizer": "adamw", "lr": 0.01, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "weight_decay": 0.1},
    ]
    doc = {"source": "scripts/make_optimizer_reference.py", "torch": torch.__version__, "seed": SEED,
           "cases": [run_case(c, gen) for c in cases]}
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
