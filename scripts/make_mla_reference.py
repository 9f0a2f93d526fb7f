#!/usr/bin/env python3
"""Writes tests/data/mla_reference.json: multi-head latent attention's output and
gradients computed by PyTorch autograd in float64, the outside reference the
Device-op implementation (models/transformer/mla_attention.cpp) is held to by
tests/models/transformer/test_mla_attention.cpp.

The attention is written here from DeepSeek-V2 (arXiv 2405.04434) §2.1 in the
form of Hugging Face transformers' DeepseekV3Attention.forward
(src/transformers/models/deepseek_v3/modeling_deepseek_v3.py @f5a9ec51):
q_a_proj, q_a_layernorm, q_b_proj (or q_proj), kv_a_proj_with_mqa split into
the latent and the RoPE key, kv_a_layernorm, kv_b_proj, each head's query
[q_nope, RoPE(q_rope)] and key [k_nope, RoPE(k_rope)] with the one k_rope
broadcast to every head, causal softmax at scale (d_n + d_r)^-1/2, o_proj. RoPE
is the rotate-half form (apply_rotary_pos_emb, rope_interleave off); RMSNorm
x * rsqrt(mean(x^2) + eps) * w. Its weights are Hugging Face's layout, built
from the implementation's (mla_attention.h: q_up and kv_up hold every head's
nope/key rows, then every head's rope/value rows) by interleaving the rows per
head, so the test also checks that mapping; the gradients are mapped back.

Two cases: a query latent (q_lora_rank 16, as DeepSeek-V3) and a direct query
projection (q_lora_rank 0, as DeepSeek-V2-Lite). Each case holds its shape, the
inputs (fp32 values written exactly: xn, dy and the weights) and the float64
results: y, dxn and every weight's gradient of L = sum(y * dy).

Needs torch (not in CI); run by hand and commit the output:
  python3 scripts/make_mla_reference.py
"""
import json
import math
import pathlib

import torch

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "mla_reference.json"
SEED = 20261205


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope(x, theta):
    # x (B, H, T, D), rotate-half: pairs (i, i + D/2) at angle pos * theta^(-2i/D).
    d, t = x.shape[-1], x.shape[-2]
    inv_freq = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    freqs = torch.outer(torch.arange(t, dtype=torch.float64), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


def interleave(w, a, first, second):
    # Rows [all heads' `first`-sized blocks, all heads' `second`-sized blocks] -> per head [first, second].
    top, bottom = w[: a * first], w[a * first :]
    return torch.cat([torch.cat((top[h * first : (h + 1) * first], bottom[h * second : (h + 1) * second]))
                      for h in range(a)])


def deinterleave(w, a, first, second):
    step = first + second
    return torch.cat([w[h * step : h * step + first] for h in range(a)] +
                     [w[h * step + first : (h + 1) * step] for h in range(a)])


def attention(sh, x, p):
    b, t, a = sh["b"], sh["s"], sh["a"]
    dn, dr, dv, eps, theta = sh["d_n"], sh["d_r"], sh["d_v"], sh["norm_eps"], sh["rope_theta"]
    if sh["r_q"] > 0:
        q = rms_norm(x @ p["q_a_proj"].T, p["q_a_layernorm"], eps) @ p["q_b_proj"].T
    else:
        q = x @ p["q_proj"].T
    q = q.view(b, t, a, dn + dr).transpose(1, 2)
    q_pass, q_rot = torch.split(q, [dn, dr], dim=-1)
    kv = x @ p["kv_a_proj_with_mqa"].T
    k_pass, k_rot = torch.split(kv, [sh["r_kv"], dr], dim=-1)
    k_pass = (rms_norm(k_pass, p["kv_a_layernorm"], eps) @ p["kv_b_proj"].T).view(b, t, a, dn + dv).transpose(1, 2)
    k_pass, v = torch.split(k_pass, [dn, dv], dim=-1)
    k_rot = k_rot.view(b, 1, t, dr)
    q_rot, k_rot = rope(q_rot, theta), rope(k_rot, theta)
    query = torch.cat((q_pass, q_rot), dim=-1)
    key = torch.cat((k_pass, k_rot.expand(b, a, t, dr)), dim=-1)
    scores = (query @ key.transpose(-1, -2)) / math.sqrt(dn + dr)
    mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
    probs = scores.masked_fill(mask, float("-inf")).softmax(-1)
    ctx = (probs @ v).transpose(1, 2).reshape(b, t, a * dv)
    return ctx @ p["o_proj"].T


def fp32_randn(gen, *shape, scale=1.0):
    return (torch.randn(*shape, generator=gen, dtype=torch.float32) * scale).to(torch.float64)


def run_case(name, sh, gen):
    h, a, rq, rkv, dn, dr, dv = sh["h"], sh["a"], sh["r_q"], sh["r_kv"], sh["d_n"], sh["d_r"], sh["d_v"]
    n = sh["b"] * sh["s"]
    q_in = rq if rq > 0 else h
    # The implementation's tensors (mla_attention.h), as the C++ test loads them.
    ours = {"kv_down": fp32_randn(gen, rkv + dr, h, scale=0.3),
            "kv_norm": 1.0 + fp32_randn(gen, rkv, scale=0.1),
            "kv_up": fp32_randn(gen, a * (dn + dv), rkv, scale=0.3),
            "q_up": fp32_randn(gen, a * (dn + dr), q_in, scale=0.3),
            "out": fp32_randn(gen, h, a * dv, scale=0.3)}
    if rq > 0:
        ours["q_down"] = fp32_randn(gen, rq, h, scale=0.3)
        ours["q_norm"] = 1.0 + fp32_randn(gen, rq, scale=0.1)
    x = fp32_randn(gen, sh["b"], sh["s"], h)
    dy = fp32_randn(gen, sh["b"], sh["s"], h)
    # Hugging Face's tensors from them.
    hf = {"kv_a_proj_with_mqa": ours["kv_down"], "kv_a_layernorm": ours["kv_norm"],
          "kv_b_proj": interleave(ours["kv_up"], a, dn, dv), "o_proj": ours["out"]}
    if rq > 0:
        hf.update({"q_a_proj": ours["q_down"], "q_a_layernorm": ours["q_norm"],
                   "q_b_proj": interleave(ours["q_up"], a, dn, dr)})
    else:
        hf["q_proj"] = interleave(ours["q_up"], a, dn, dr)
    hf = {k: v.clone().requires_grad_(True) for k, v in hf.items()}
    x.requires_grad_(True)
    y = attention(sh, x, hf)
    (y * dy).sum().backward()
    grads = {"kv_down": hf["kv_a_proj_with_mqa"].grad, "kv_norm": hf["kv_a_layernorm"].grad,
             "kv_up": deinterleave(hf["kv_b_proj"].grad, a, dn, dv), "out": hf["o_proj"].grad}
    if rq > 0:
        grads.update({"q_down": hf["q_a_proj"].grad, "q_norm": hf["q_a_layernorm"].grad,
                      "q_up": deinterleave(hf["q_b_proj"].grad, a, dn, dr)})
    else:
        grads["q_up"] = deinterleave(hf["q_proj"].grad, a, dn, dr)
    flat = lambda v: [float(f) for f in v.detach().reshape(-1)]
    return {"name": name, "shape": sh,
            "inputs": {"xn": flat(x), "dy": flat(dy), **{k: flat(v) for k, v in ours.items()}},
            "y": flat(y), "dxn": flat(x.grad), "grads": {k: flat(v) for k, v in grads.items()},
            "tokens": n}


def main():
    gen = torch.Generator().manual_seed(SEED)
    base = {"b": 2, "s": 5, "h": 32, "a": 4, "r_kv": 12, "d_n": 8, "d_r": 4, "d_v": 6,
            "norm_eps": 1e-6, "rope_theta": 10000.0}
    cases = [run_case("q_latent", dict(base, r_q=16), gen), run_case("q_direct", dict(base, r_q=0), gen)]
    doc = {"source": "scripts/make_mla_reference.py (torch " + torch.__version__ + ", float64 autograd)",
           "cases": cases}
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
