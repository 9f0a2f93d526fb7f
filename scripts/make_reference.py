#!/usr/bin/env python3
"""Writes the outside numerical oracle under tests/data/: tiny random Llama and
GPT-2 models built and trained for one step by PyTorch + Hugging Face
transformers, which tests/parallel/test_oracle.cpp compares gpuledger against.

Run by hand (CI has neither torch nor transformers), from the repository root:
    python3 scripts/make_reference.py            # writes tests/data/{llama,gpt2}/
Produced with torch 2.15.0 and transformers 5.24.0 (the versions are written
into each reference's metadata).

For each model, tests/data/<name>/ holds:
  config.json, model.safetensors  the checkpoint (save_pretrained, fp32)
  tokens.npy | tokens.bin         the token batch: llama a NumPy int32 array of
                                  shape [batch, seq + 1]; gpt2 llm.c's token
                                  format (256 int32 header: magic 20240520,
                                  version 1, count; uint16 tokens), one stream
                                  whose row g is tokens[g*seq : g*seq + seq + 1]
  reference.safetensors           "logits" [batch, seq, vocab], "loss" [1],
                                  "grad.<name>" for every parameter, and
                                  "updated.<name>" every parameter after one
                                  torch.optim.AdamW step; the hyperparameters
                                  in its metadata
The step (llm.c's convention): inputs are the first seq tokens of each row,
targets the next seq; loss = mean token cross-entropy; dropout off; no
gradient clipping; AdamW(lr, betas, eps) with decoupled weight decay on the
2-D parameters only (gpuledger's rule: no decay on norms and biases).
"""
import json
import os
import struct
import sys

import numpy as np
import torch
import transformers
from safetensors.torch import save_file

SEED = 20240520
BATCH, SEQ = 2, 8
LR, BETA1, BETA2, EPS, WEIGHT_DECAY = 1e-3, 0.9, 0.95, 1e-8, 0.1


def llama_model():
    cfg = transformers.LlamaConfig(
        vocab_size=48, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8,  # GQA, and head_dim*heads != hidden
        max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=500000.0,
        tie_word_embeddings=False, attention_bias=False, mlp_bias=False, hidden_act="silu")
    return transformers.LlamaForCausalLM(cfg)


def gpt2_model():
    cfg = transformers.GPT2Config(
        vocab_size=48, n_embd=16, n_layer=2, n_head=2, n_positions=32, layer_norm_epsilon=1e-5,
        activation_function="gelu_new", bos_token_id=0, eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return transformers.GPT2LMHeadModel(cfg)


def randomise(model):
    # save_pretrained's init leaves norms at 1 and biases at 0; random values
    # everywhere make a wrong mapping of any tensor show in the loss.
    g = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and ("ln" in name or "norm" in name):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=g))


def write_llmc_tokens(path, tokens):
    header = [0] * 256
    header[0], header[1], header[2] = 20240520, 1, len(tokens)
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(np.asarray(tokens, dtype="<u2").tobytes())


def make(name, model, token_format):
    out = os.path.join("tests", "data", name)
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(SEED)
    randomise(model)
    model.config.attn_implementation = "eager"
    model.save_pretrained(out, safe_serialization=True)
    vocab = model.config.vocab_size
    g = torch.Generator().manual_seed(SEED + 1)
    if token_format == "npy":  # [batch, seq + 1] rows
        rows = torch.randint(0, vocab, (BATCH, SEQ + 1), generator=g, dtype=torch.int32)
        np.save(os.path.join(out, "tokens.npy"), rows.numpy())
    else:  # one stream; row g starts at g*SEQ (llm.c's DataLoader)
        stream = torch.randint(0, vocab, (BATCH * SEQ + 1,), generator=g)
        write_llmc_tokens(os.path.join(out, "tokens.bin"), stream.tolist())
        rows = torch.stack([stream[i * SEQ:i * SEQ + SEQ + 1] for i in range(BATCH)])
    inputs, targets = rows[:, :SEQ].long(), rows[:, 1:].long()

    model.train()
    logits = model(input_ids=inputs).logits  # [batch, seq, vocab]
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))
    loss.backward()
    named = dict(model.named_parameters())
    # Tied weights appear once in named_parameters (the embedding); the file has the same names.
    ref = {"logits": logits.detach().contiguous(), "loss": loss.detach().reshape(1)}
    for n, p in named.items():
        ref["grad." + n] = p.grad.detach().clone().contiguous()
    decay = [p for p in named.values() if p.dim() >= 2]
    no_decay = [p for p in named.values() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=LR, betas=(BETA1, BETA2), eps=EPS, foreach=False)
    opt.step()
    for n, p in named.items():
        ref["updated." + n] = p.detach().clone().contiguous()
    meta = {"batch": str(BATCH), "seq": str(SEQ), "lr": repr(LR), "beta1": repr(BETA1), "beta2": repr(BETA2),
            "eps": repr(EPS), "weight_decay": repr(WEIGHT_DECAY), "torch": torch.__version__,
            "transformers": transformers.__version__, "seed": str(SEED)}
    if os.path.exists(os.path.join(out, "generation_config.json")):  # not read by gpuledger
        os.remove(os.path.join(out, "generation_config.json"))
    save_file(ref, os.path.join(out, "reference.safetensors"), metadata=meta)
    print(f"{name}: loss {loss.item():.9g}, {sum(p.numel() for p in named.values())} parameters -> {out}")


def main():
    torch.use_deterministic_algorithms(True)
    make("llama", llama_model(), "npy")
    make("gpt2", gpt2_model(), "bin")
    return 0


if __name__ == "__main__":
    sys.exit(main())
