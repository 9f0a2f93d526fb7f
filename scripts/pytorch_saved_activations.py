#!/usr/bin/env python3
"""The bytes PyTorch autograd saves for backward in one transformer block, tensor by tensor.

Run by hand (CI has no torch); its output is the PyTorch column of
docs/formulas/activations-vs-pytorch.md:

    python3 scripts/pytorch_saved_activations.py            # a table
    python3 scripts/pytorch_saved_activations.py --json     # the same, as JSON

One GPT-2 block (transformers GPT2Block) and one Llama block (LlamaDecoderLayer)
of the shapes of gpuledger's tiny-gpt and tiny-llama presets (h = 64, a = 4,
d = 16; gpt f = 256, llama k = 2, f = 176), b = 2, s = 32, bf16, eager
(materialized) attention, training mode with each model's default dropout
(gpt 0.1, llama 0), on the CPU.

Every tensor autograd packs during the block's forward is recorded with
torch.autograd.graph.saved_tensors_hooks; the autograd node that saved it is
found by walking the graph from the output (each node's _saved_* attributes).
Bytes are counted once per unique storage (views of one storage share it);
storages that belong to a parameter (weights saved by matmuls) are listed apart,
since they are not activations.
"""
import argparse
import json
import sys

import torch
from transformers import GPT2Config, LlamaConfig
from transformers.models.gpt2.modeling_gpt2 import GPT2Block
from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

B, S = 2, 32


def gpt_block():
    cfg = GPT2Config(n_embd=64, n_head=4, n_inner=256, n_positions=64, n_layer=1, vocab_size=97,
                     attn_pdrop=0.1, resid_pdrop=0.1, embd_pdrop=0.1, activation_function="gelu_new")
    cfg._attn_implementation = "eager"
    block = GPT2Block(cfg, layer_idx=0).to(torch.bfloat16).train()
    x = torch.randn(B, S, 64, dtype=torch.bfloat16, requires_grad=True)

    def run():
        out = block(x)
        return out[0] if isinstance(out, tuple) else out

    return block, x, run


def llama_block():
    cfg = LlamaConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                      intermediate_size=176, num_hidden_layers=1, vocab_size=97, max_position_embeddings=64,
                      attention_dropout=0.0)
    cfg._attn_implementation = "eager"
    block = LlamaDecoderLayer(cfg, layer_idx=0).to(torch.bfloat16).train()
    rope = LlamaRotaryEmbedding(cfg)
    x = torch.randn(B, S, 64, dtype=torch.bfloat16, requires_grad=True)
    pos = torch.arange(S).unsqueeze(0).expand(B, S)
    cos, sin = rope(x, pos)
    mask = torch.full((S, S), float("-inf")).triu(1).to(torch.bfloat16)[None, None].expand(B, 1, S, S)

    def run():
        out = block(x, attention_mask=mask, position_ids=pos, position_embeddings=(cos, sin))
        return out[0] if isinstance(out, tuple) else out

    return block, x, run


def node_names(root):
    """Maps id(saved tensor storage pointer, shape) to 'Node._saved_attr' by walking the graph."""
    names, seen, stack = {}, set(), [root]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        for attr in dir(node):
            if not attr.startswith("_saved_"):
                continue
            try:
                value = getattr(node, attr)
            except RuntimeError:
                continue
            if isinstance(value, torch.Tensor):
                key = (value.untyped_storage().data_ptr(), tuple(value.shape), value.dtype)
                names.setdefault(key, []).append(f"{type(node).__name__}.{attr[len('_saved_'):]}")
        stack.extend(n for n, _ in node.next_functions)
    return names


def measure(make):
    torch.manual_seed(0)
    block, x, run = make()
    params = {p.untyped_storage().data_ptr() for p in block.parameters()}
    packed = []

    def pack(t):
        packed.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = run()
    names = node_names(out.grad_fn)
    rows, storages = [], {}
    for t in packed:
        ptr = t.untyped_storage().data_ptr()
        key = (ptr, tuple(t.shape), t.dtype)
        who = ", ".join(sorted(set(names.get(key, ["?"]))))
        kind = "parameter" if ptr in params else ("block input" if ptr == x.untyped_storage().data_ptr() else "saved")
        new = ptr not in storages
        storages.setdefault(ptr, t.untyped_storage().nbytes())
        rows.append({"saved_by": who, "shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""),
                     "storage_bytes": t.untyped_storage().nbytes(), "new_storage": new, "kind": kind})
    total = sum(b for p, b in storages.items() if p not in params)
    return {"tensors": rows, "unique_activation_storage_bytes": total,
            "parameter_storage_bytes": sum(b for p, b in storages.items() if p in params)}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    doc = {"torch": torch.__version__, "shape": {"b": B, "s": S}, "gpt2_block": measure(gpt_block),
           "llama_block": measure(llama_block)}
    if a.json:
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return
    print(f"torch {doc['torch']}, b = {B}, s = {S}, bf16, eager attention")
    for name in ("gpt2_block", "llama_block"):
        m = doc[name]
        print(f"\n## {name}: {m['unique_activation_storage_bytes']} B in unique non-parameter storages "
              f"(parameters saved: {m['parameter_storage_bytes']} B)")
        print("| saved by | shape | dtype | storage bytes | counted |")
        print("|---|---|---|---|---|")
        for r in m["tensors"]:
            counted = "parameter" if r["kind"] == "parameter" else ("yes" if r["new_storage"] else "shared")
            print(f"| {r['saved_by']} | {r['shape']} | {r['dtype']} | {r['storage_bytes']} | {counted} |")


if __name__ == "__main__":
    main()
