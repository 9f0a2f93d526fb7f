#!/usr/bin/env python3
"""Runs Megatron-LM's own memory and FLOPs functions on the configurations of
tests/analytic/test_megatron.cpp and prints what they return, as JSON.

Run by hand (CI does not have a Megatron checkout):

    python3 scripts/megatron_reference.py --git-dir /path/to/Megatron-LM/.git \
        --commit d98e8a64ddf34856e74b24714e3bedb2f5a39553 > tests/analytic/megatron_reference.json

The two files are read from the checkout at that commit (git show), never copied
into this repository: megatron/training/theoretical_memory_usage.py is loaded as a
module of a stub package whose `utils` holds the two helpers it imports
(is_hybrid_model -> False: a dense transformer; print_rank_0 -> silent), and
num_floating_point_operations is taken out of megatron/training/training.py by its
syntax tree and run with the helpers it calls for a dense transformer. Arguments
are a namespace of Megatron's argument names; the ones these functions read for
MoE, MTP, MLA and linear attention are None / False.
"""
import argparse
import ast
import contextlib
import io
import json
import subprocess
import sys
import types

MB = 1024 * 1024


def git_show(git_dir, commit, path):
    return subprocess.run(["git", "--git-dir", git_dir, "show", f"{commit}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def load_memory_module(source):
    pkg = types.ModuleType("megatron_ref")
    pkg.__path__ = []
    utils = types.ModuleType("megatron_ref.utils")
    utils.is_hybrid_model = lambda args: False
    utils.print_rank_0 = lambda *a, **k: None
    sys.modules["megatron_ref"] = pkg
    sys.modules["megatron_ref.utils"] = utils
    mod = types.ModuleType("megatron_ref.theoretical_memory_usage")
    mod.__package__ = "megatron_ref"
    exec(compile(source, "theoretical_memory_usage.py", "exec"), mod.__dict__)
    return mod


def load_flops_function(source):
    tree = ast.parse(source)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "num_floating_point_operations")
    namespace = {"is_hybrid_model": lambda args: False, "is_linear_attention_variant": lambda v: False}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), "training.py", "exec"), namespace)
    return namespace["num_floating_point_operations"]


class Args(types.SimpleNamespace):
    """Megatron's argument names; anything not set reads as None."""

    def __getattr__(self, name):
        return None


def padded_vocab(vocab, tp):
    # megatron/core/tokenizers/utils/build_tokenizer.py vocab_size_with_padding, divisible by 128.
    multiple = 128 * tp
    return -(-vocab // multiple) * multiple


def make_args(model, tp, pp, dp, seq, mbs, sp=False, recompute=None, distributed=False, vpp=None):
    llama = model["flavour"] == "llama"
    return Args(
        num_layers=model["layers"], hidden_size=model["hidden"], num_attention_heads=model["heads"],
        kv_channels=model["head_dim"], group_query_attention=model["kv_heads"] != model["heads"],
        num_query_groups=model["kv_heads"], ffn_hidden_size=model["ffn"], swiglu=llama,
        normalization="RMSNorm" if llama else "LayerNorm",
        untie_embeddings_and_output_weights=not model["tied_embeddings"],
        padded_vocab_size=padded_vocab(model["vocab"], tp), multi_latent_attention=False, add_bias_linear=False,
        tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp, data_parallel_size=dp,
        world_size=tp * pp * dp, expert_tensor_parallel_size=1, expert_model_parallel_size=1,
        use_distributed_optimizer=distributed, seq_length=seq, micro_batch_size=mbs, sequence_parallel=sp,
        recompute_granularity=recompute, virtual_pipeline_model_parallel_size=vpp, attention_output_gate=False,
        experimental_attention_variant=None, moe_router_topk=2)


# The cases of tests/analytic/test_megatron.cpp (model presets copied as numbers).
MODELS = {
    "llama2-7b": dict(flavour="llama", layers=32, hidden=4096, heads=32, kv_heads=32, head_dim=128, ffn=11008,
                      vocab=32000, tied_embeddings=False),
    "llama3-8b": dict(flavour="llama", layers=32, hidden=4096, heads=32, kv_heads=8, head_dim=128, ffn=14336,
                      vocab=128256, tied_embeddings=False),
    "gpt2": dict(flavour="gpt", layers=12, hidden=768, heads=12, kv_heads=12, head_dim=64, ffn=3072, vocab=50257,
                 tied_embeddings=True),
}
CASES = [
    dict(name="llama2-7b_tp2_pp2_dp4", model="llama2-7b", tp=2, pp=2, dp=4, seq=4096, mbs=1, microbatches=8),
    dict(name="llama3-8b_tp4_sp_selective", model="llama3-8b", tp=4, pp=1, dp=2, seq=8192, mbs=1, microbatches=4,
         sp=True, recompute="selective"),
    dict(name="gpt2_dp2", model="gpt2", tp=1, pp=1, dp=2, seq=1024, mbs=4, microbatches=2),
    dict(name="llama2-7b_pp4_m2", model="llama2-7b", tp=1, pp=4, dp=1, seq=2048, mbs=2, microbatches=2),
    dict(name="llama2-7b_pp4_interleaved2", model="llama2-7b", tp=1, pp=4, dp=1, seq=2048, mbs=2, microbatches=8,
         vpp=2),
]


def run_case(mem, flops, c):
    model = MODELS[c["model"]]
    common = dict(sp=c.get("sp", False), recompute=c.get("recompute"), vpp=c.get("vpp"))
    out = {"case": c}
    for distributed in (False, True):
        args = make_args(model, c["tp"], c["pp"], c["dp"], c["seq"], c["mbs"], distributed=distributed, **common)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            weights_mb, activation_mb, _ = mem.report_theoretical_memory(args, num_microbatches=c["microbatches"])
        key = "distributed_optimizer" if distributed else "plain"
        out[f"printed_{key}"] = printed.getvalue().strip()
        out[f"weight_and_optimizer_bytes_{key}"] = weights_mb * MB
        out["activation_bytes"] = activation_mb * MB
    args = make_args(model, c["tp"], c["pp"], c["dp"], c["seq"], c["mbs"], **common)
    out["num_floating_point_operations"] = float(flops(args, c["microbatches"] * c["mbs"] * c["dp"]))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--git-dir", required=True, help="a Megatron-LM git directory")
    p.add_argument("--commit", required=True)
    a = p.parse_args()
    mem = load_memory_module(git_show(a.git_dir, a.commit, "megatron/training/theoretical_memory_usage.py"))
    flops = load_flops_function(git_show(a.git_dir, a.commit, "megatron/training/training.py"))
    doc = {"megatron_commit": a.commit,
           "functions": ["megatron/training/theoretical_memory_usage.py report_theoretical_memory",
                         "megatron/training/training.py num_floating_point_operations"],
           "results": [run_case(mem, flops, c) for c in CASES]}
    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
