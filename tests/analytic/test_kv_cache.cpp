// KV-cache budget (analytic/kv_cache.h): the published per-token
// figures of four real models, TP split and replication, sliding windows,
// quantized caches with their scales, contiguous and paged reservations (with
// vLLM's null block), capacity under vLLM's memory rule, the decode roofline.
#include <gtest/gtest.h>

#include "analytic/kv_cache.h"

namespace gpuledger::analytic {
namespace {

constexpr int64_t KiB = 1024;
constexpr int64_t GiB = int64_t{1} << 30;

// Shapes from the models' Hugging Face config.json (num_hidden_layers,
// hidden_size, num_attention_heads, num_key_value_heads, intermediate_size,
// vocab_size, max_position_embeddings, sliding_window).
ModelConfig llama(std::string name, int64_t layers, int64_t hidden, int64_t heads, int64_t kv_heads, int64_t ffn,
                  int64_t vocab, int64_t max_seq) {
  ModelConfig m;
  m.name = std::move(name);
  m.flavour = Flavour::kLlama;
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = kv_heads;
  m.head_dim = hidden / heads;
  m.ffn = ffn;
  m.vocab = vocab;
  m.max_seq = max_seq;
  return m;
}
ModelConfig llama2_7b() { return llama("llama-2-7b", 32, 4096, 32, 32, 11008, 32000, 4096); }
ModelConfig llama3_8b() { return llama("llama-3-8b", 32, 4096, 32, 8, 14336, 128256, 8192); }
ModelConfig qwen25_7b() { return llama("qwen2.5-7b", 28, 3584, 28, 4, 18944, 152064, 32768); }
ModelConfig qwen25_32b() { return llama("qwen2.5-32b", 64, 5120, 40, 8, 27648, 152064, 32768); }
ModelConfig mistral_7b() {
  auto m = llama("mistral-7b-v0.1", 32, 4096, 32, 8, 14336, 32000, 32768);
  m.sliding_window = 4096;
  return m;
}

Layout layout(int64_t tp = 1, int64_t pp = 1) {
  Layout l;
  l.tp = tp;
  l.pp = pp;
  return l;
}

KvOptions opts(KvLayout kind, KvFormat dtype = KvFormat::kBF16, KvScales scales = KvScales::kPerTokenHead) {
  KvOptions o;
  o.layout = kind;
  o.dtype = dtype;
  o.scales = scales;
  return o;
}

TEST(KvCache, PublishedBytesPerToken) {
  // bf16: 2 (K, V) · layers · kv_heads · head_dim · 2 bytes.
  EXPECT_EQ(kv_bytes_per_token(llama2_7b(), layout(), KvFormat::kBF16), 512 * KiB);
  EXPECT_EQ(kv_bytes_per_token(llama3_8b(), layout(), KvFormat::kBF16), 128 * KiB);
  EXPECT_EQ(kv_bytes_per_token(qwen25_7b(), layout(), KvFormat::kBF16), 56 * KiB);
  EXPECT_EQ(kv_bytes_per_token(qwen25_32b(), layout(), KvFormat::kBF16), 256 * KiB);
}

TEST(KvCache, TensorParallelSplitsThenReplicates) {
  const auto m = llama3_8b();  // 8 KV heads
  EXPECT_EQ(kv_bytes_per_token(m, layout(2), KvFormat::kBF16), 64 * KiB);
  EXPECT_EQ(kv_bytes_per_token(m, layout(8), KvFormat::kBF16), 16 * KiB);
  // t = 16 > k = 8: one (replicated) head per rank, not half of one.
  EXPECT_EQ(kv_bytes_per_token(m, layout(16), KvFormat::kBF16), 16 * KiB);
  // Pipeline: a stage holds L/p layers.
  EXPECT_EQ(kv_bytes_per_token(m, layout(2, 4), KvFormat::kBF16), 16 * KiB);
}

TEST(KvCache, NamesRoundTrip) {
  for (auto k : {KvLayout::kContiguous, KvLayout::kPaged}) EXPECT_EQ(kv_layout_from_name(kv_layout_name(k)), k);
  for (auto t : {KvFormat::kBF16, KvFormat::kFP8E4M3, KvFormat::kInt8, KvFormat::kInt4})
    EXPECT_EQ(kv_format_from_name(kv_format_name(t)), t);
  for (auto s : {KvScales::kPerTensor, KvScales::kPerTokenHead, KvScales::kPerChannel, KvScales::kPerGroup})
    EXPECT_EQ(kv_scales_from_name(kv_scales_name(s)), s);
  EXPECT_FALSE(kv_format_from_name("fp4"));
  EXPECT_EQ(kv_values_bytes(KvFormat::kFP8E4M3, 128), 128);
  EXPECT_EQ(kv_values_bytes(KvFormat::kBF16, 128), 256);
  EXPECT_EQ(kv_values_bytes(KvFormat::kInt4, 128), 64);  // two codes per byte
}

TEST(KvCache, PagedRoundsUpToBlocksPlusTheNullBlock) {
  const auto m = llama3_8b();
  const auto o = opts(KvLayout::kPaged);  // block 16
  EXPECT_EQ(kv_block_bytes(m, layout(), o), 16 * 128 * KiB);
  // 3 sequences of 100 tokens: ⌈100/16⌉ = 7 blocks each, + 1 null block = 22.
  EXPECT_EQ(kv_reserved_bytes(m, layout(), o, 3, 100), 22 * 16 * 128 * KiB);
  // Exactly 96 tokens fill 6 blocks: 3·6 + 1 = 19.
  EXPECT_EQ(kv_reserved_bytes(m, layout(), o, 3, 96), 19 * 16 * 128 * KiB);
  // Block 32: ⌈100/32⌉ = 4 → 13 blocks of 32 tokens.
  KvOptions o32 = o;
  o32.block = 32;
  EXPECT_EQ(kv_reserved_bytes(m, layout(), o32, 3, 100), 13 * 32 * 128 * KiB);
}

TEST(KvCache, ContiguousReservesMaxModelLen) {
  const auto m = llama3_8b();
  KvOptions o = opts(KvLayout::kContiguous);
  o.max_model_len = 1000;
  // Every sequence reserves 1000 tokens whatever its context.
  EXPECT_EQ(kv_reserved_bytes(m, layout(), o, 3, 10), 3 * 1000 * 128 * KiB);
  EXPECT_EQ(kv_reserved_bytes(m, layout(), o, 3, 1000), 3 * 1000 * 128 * KiB);
  EXPECT_THROW(kv_reserved_bytes(m, layout(), o, 1, 1001), LayoutError);
  // Default: the model's max_seq (8192).
  o.max_model_len = 0;
  EXPECT_EQ(kv_reserved_bytes(m, layout(), o, 2, 10), 2 * 8192 * 128 * KiB);
}

TEST(KvCache, SlidingWindowCapsMistralAt4096) {
  const auto m = mistral_7b();
  EXPECT_EQ(kv_tokens_kept(m, {}, 4000), 4000);
  EXPECT_EQ(kv_tokens_kept(m, {}, 10000), 4096);
  EXPECT_EQ(kv_tokens_kept(llama3_8b(), {}, 10000), 10000);
  // Paged, one 10000-token sequence: 4096/16 = 256 blocks + the null block.
  EXPECT_EQ(kv_reserved_bytes(m, layout(), opts(KvLayout::kPaged), 1, 10000), 257 * 16 * 128 * KiB);
  // Contiguous over max_model_len 32768 still keeps only the window.
  EXPECT_EQ(kv_reserved_bytes(m, layout(), opts(KvLayout::kContiguous), 2, 10000), 2 * 4096 * 128 * KiB);
}

TEST(KvCache, QuantizedCachesAndTheirScales) {
  const auto m = llama3_8b();  // 32 layers, 8 KV heads, d = 128
  EXPECT_EQ(kv_bytes_per_token(m, layout(), KvFormat::kFP8E4M3), 64 * KiB);
  EXPECT_EQ(kv_bytes_per_token(m, layout(), KvFormat::kInt8), 64 * KiB);
  // Per token-head: a K and a V fp32 scale per head per layer per token: 2·32·8·4.
  const auto th = opts(KvLayout::kPaged, KvFormat::kFP8E4M3, KvScales::kPerTokenHead);
  EXPECT_EQ(kv_scale_bytes_per_token(m, layout(), th), 2048);
  EXPECT_EQ(kv_scale_bytes_fixed(m, layout(), th), 0);
  EXPECT_EQ(kv_block_bytes(m, layout(), th), 16 * (64 * KiB + 2048));
  EXPECT_EQ(kv_reserved_bytes(m, layout(), th, 1, 16), 2 * 16 * (64 * KiB + 2048));
  // Per tensor: 2 scales per layer, fixed: 2·32·4 = 256 B once.
  const auto pt = opts(KvLayout::kPaged, KvFormat::kInt8, KvScales::kPerTensor);
  EXPECT_EQ(kv_scale_bytes_per_token(m, layout(), pt), 0);
  EXPECT_EQ(kv_scale_bytes_fixed(m, layout(), pt), 256);
  EXPECT_EQ(kv_reserved_bytes(m, layout(), pt, 1, 16), 2 * 16 * 64 * KiB + 256);
  // Per channel: 2·32·8·128 fp32 scales, fixed; under t = 2 half the heads.
  const auto pc = opts(KvLayout::kPaged, KvFormat::kFP8E4M3, KvScales::kPerChannel);
  EXPECT_EQ(kv_scale_bytes_fixed(m, layout(), pc), 2 * 32 * 8 * 128 * 4);
  EXPECT_EQ(kv_scale_bytes_fixed(m, layout(2), pc), 2 * 32 * 4 * 128 * 4);
  // bf16 has no scales at any granularity.
  EXPECT_EQ(kv_scale_bytes_per_token(m, layout(), opts(KvLayout::kPaged)), 0);
  EXPECT_EQ(kv_scale_bytes_fixed(m, layout(), opts(KvLayout::kPaged, KvFormat::kBF16, KvScales::kPerChannel)), 0);
}

TEST(KvCache, CapacityByHand) {
  const auto m = llama3_8b();
  const int64_t device = 80 * GiB;  // 85,899,345,920 B
  const int64_t weights = 16'060'000'000;
  const int64_t acts = 1 * GiB;
  const int64_t overhead = 512 * 1024 * 1024;
  // 0.9 × 85,899,345,920 = 77,309,411,328; less weights, activations and
  // overhead: 77,309,411,328 − 16,060,000,000 − 1,073,741,824 − 536,870,912.
  const int64_t pool = 59'638'798'592;
  // Paged, block 16 (2 MiB): ⌊pool / 2,097,152⌋ = 28,437 blocks, one of them
  // the null block: 28,436 usable; an 8192-token sequence takes 512.
  auto cap = kv_capacity(m, layout(), opts(KvLayout::kPaged), device, 0.9, weights, acts, overhead, 8192);
  EXPECT_EQ(cap.pool_bytes, pool);
  EXPECT_EQ(cap.sequences, 55);  // ⌊28,436 / 512⌋
  EXPECT_EQ(cap.tokens, 28'436 * 16);
  // 1000-token sequences: ⌈1000/16⌉ = 63 blocks each: ⌊28,436 / 63⌋ = 451.
  EXPECT_EQ(kv_capacity(m, layout(), opts(KvLayout::kPaged), device, 0.9, weights, acts, overhead, 1000).sequences,
            451);
  // Contiguous, max_model_len 8192 = 1 GiB per sequence: ⌊pool / 1 GiB⌋ = 55,
  // whatever the context.
  KvOptions c = opts(KvLayout::kContiguous);
  c.max_model_len = 8192;
  cap = kv_capacity(m, layout(), c, device, 0.9, weights, acts, overhead, 1000);
  EXPECT_EQ(cap.sequences, 55);
  EXPECT_EQ(cap.tokens, 55 * 8192);
  // A model that does not fit: negative pool, nothing else.
  cap = kv_capacity(m, layout(), opts(KvLayout::kPaged), 16 * GiB, 0.9, weights, acts, overhead, 8192);
  EXPECT_LT(cap.pool_bytes, 0);
  EXPECT_EQ(cap.sequences, 0);
  EXPECT_EQ(cap.tokens, 0);
  EXPECT_THROW(kv_capacity(m, layout(), c, device, 1.5, weights, acts, overhead, 10), std::invalid_argument);
}

// vLLM's own figures, computed as its current code does (kv_cache.cpp names
// the files and commit): Llama-3-8B, one rank of 80 GiB, bf16, block 16.
TEST(VllmKvLog, TheTwoLinesVllmLogs) {
  const auto m = llama3_8b();
  VllmKvInputs in;
  in.total_memory_bytes = 80 * GiB;  // 85,899,345,920
  in.gpu_memory_utilization = 0.92;
  in.weight_bytes = 16'060'522'496;
  in.torch_peak_increase_bytes = 1 * GiB;
  in.non_torch_increase_bytes = 512 * 1024 * 1024;
  in.max_model_len = 8192;
  const auto v = vllm_kv_log(m, layout(), opts(KvLayout::kPaged), in);
  // requested = 85,899,345,920 × 0.92 = 79,027,398,246.4 (a float in vLLM);
  // available = int(79,027,398,246.4 − (16,060,522,496 + 1,073,741,824 +
  // 536,870,912)) = int(61,356,263,014.4) = 61,356,263,014.
  EXPECT_EQ(v.requested_bytes, 79'027'398'246);
  EXPECT_EQ(v.available_bytes, 61'356'263'014);
  // num_blocks = available // page (16 · 2 · 8 · 128 · 2 = 65,536) // 32 layers
  // = available // 2,097,152 = 29,256 (the null block among them).
  EXPECT_EQ(v.num_blocks, 29'256);
  // Maximum concurrency = 29,256 / ⌈8192/16⌉ = 57.140625 ("57.14x");
  // GPU KV cache size = int(57.140625 × 8192) = 468,096 tokens.
  EXPECT_DOUBLE_EQ(v.max_concurrency, 57.140625);
  EXPECT_EQ(v.tokens, 468'096);
  // Our usable figure for the same pool leaves the null block out: 29,255 blocks.
  // The CUDA-graph estimate, when vLLM applies it, comes off the same budget.
  in.cuda_graph_estimate_bytes = 2'097'152;
  EXPECT_EQ(vllm_kv_log(m, layout(), opts(KvLayout::kPaged), in).num_blocks, 29'255);
  // A windowed model is sized by its window in vLLM: refused, not guessed.
  EXPECT_THROW(vllm_kv_log(mistral_7b(), layout(), opts(KvLayout::kPaged), in), std::invalid_argument);
}

TEST(VllmKvLog, DefaultMaxNumBatchedTokensByDevice) {
  // vllm/engine/arg_utils.py get_batch_defaults: >= 70 GiB and not an A100.
  EXPECT_EQ(vllm_default_max_num_batched_tokens(80 * GiB, "h100-sxm", true), 8192);
  EXPECT_EQ(vllm_default_max_num_batched_tokens(80 * GiB, "h100-sxm", false), 16384);
  EXPECT_EQ(vllm_default_max_num_batched_tokens(80 * GiB, "a100-80gb", true), 2048);
  EXPECT_EQ(vllm_default_max_num_batched_tokens(24 * GiB, "l4", true), 2048);
  EXPECT_EQ(vllm_default_max_num_batched_tokens(24 * GiB, "l4", false), 8192);
}

TEST(KvCache, DecodeRoofline) {
  // 16e9 B of weights + 4 sequences × 1 GiB of KV at 3.35 TB/s:
  // 20,294,967,296 B per step → 6.0582 ms, 660.3 tokens/s.
  const auto d = decode_roofline(16'000'000'000, GiB, 4, 3.35e12);
  EXPECT_EQ(d.bytes_per_step, 20'294'967'296);
  EXPECT_NEAR(d.step_seconds, 6.05820e-3, 1e-8);
  EXPECT_NEAR(d.tokens_per_s, 660.26, 0.01);
  EXPECT_THROW(decode_roofline(1, 1, 1, 0.0), std::invalid_argument);
}

}  // namespace
}  // namespace gpuledger::analytic
