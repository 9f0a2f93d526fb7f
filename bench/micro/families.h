// The op families gpl_micro registers, one function per file (bench_*.cpp).
// Each registers its benchmarks for every backend of the options that can be
// made here.
#pragma once
#include "bench/micro/micro_options.h"

namespace gpuledger::micro {

void register_gemm(const MicroOptions& o);       // layer GEMMs: fwd, dgrad, wgrad
void register_attention(const MicroOptions& o);  // materialized and flash, fwd and bwd; softmax
void register_norm(const MicroOptions& o);       // layernorm (gpt) / rmsnorm (llama)
void register_rope(const MicroOptions& o);       // llama presets
void register_loss(const MicroOptions& o);       // cross-entropy
void register_adamw(const MicroOptions& o);
void register_kv(const MicroOptions& o);           // kv_cache_write, cached_attention
void register_convert(const MicroOptions& o);      // dtype conversion
void register_elementwise(const MicroOptions& o);  // the layer's remaining element-wise ops
void register_ledger(const MicroOptions& o);       // the ledger's own cost

// "<family>/<backend>/<rest>" — the names filters and micro_compare.py match on.
std::string bench_name(const char* family, const std::string& backend, const std::string& rest);

}  // namespace gpuledger::micro
