#!/usr/bin/env python3
"""Loads what `gpuledger train --save-weights DIR` wrote with Hugging Face
transformers and checks it (run by hand; needs torch and transformers):

    python3 scripts/roundtrip_weights.py DIR [REFERENCE_DIR]

- transformers' AutoModelForCausalLM.from_pretrained(DIR) loads it, and every
  parameter it holds is bit-exact the tensor of DIR/model.safetensors (no
  parameter left at its random initialisation);
- the config it read carries gpuledger's norm epsilon and RoPE theta;
- with REFERENCE_DIR (tests/data/llama or tests/data/gpt2, whose
  reference.safetensors scripts/make_reference.py wrote) and a DIR saved after
  exactly one step of the reference's run (docs/guide.md, "Bring your own
  checkpoint and tokens"): the largest difference from transformers' own weights after its
  AdamW step.
Exit 1 on a mismatch.
"""
import sys

import torch
import transformers
from safetensors.torch import load_file


def main():
    saved = sys.argv[1]
    model = transformers.AutoModelForCausalLM.from_pretrained(saved, attn_implementation="eager")
    written = load_file(f"{saved}/model.safetensors")
    params = dict(model.named_parameters())
    for name, p in params.items():
        if name not in written:
            print(f"{name}: not in the file (transformers left it at its initialisation)")
            return 1
        if not torch.equal(p.detach(), written[name]):
            print(f"{name}: loaded values differ from the file")
            return 1
    cfg = model.config
    eps = getattr(cfg, "rms_norm_eps", None) or getattr(cfg, "layer_norm_epsilon", None)
    rope = getattr(cfg, "rope_parameters", None)
    print(f"{type(model).__name__}: {len(params)} tensors, {sum(p.numel() for p in params.values())} parameters, "
          f"every one loaded bit-exact; norm eps {eps}; rope {rope}")
    if len(sys.argv) > 2:
        ref = load_file(f"{sys.argv[2]}/reference.safetensors")
        worst = max((params[n].detach() - ref["updated." + n]).abs().max().item() for n in params)
        print(f"largest difference from transformers' weights after one AdamW step: {worst:.3g}")
        if worst > 2e-3:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
