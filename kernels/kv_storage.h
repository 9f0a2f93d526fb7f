// KV-cache storage as the Device reads and writes it: the value formats (bf16,
// OCP FP8 E4M3, int8), the scale granularities, their scalar codecs, and the
// view of a cache that the two KV ops (Device::kv_cache_write,
// Device::cached_attention) take — where each token's K and V of one layer
// live (a block table over a base pointer, and the layout inside a block) and
// how many tokens each sequence holds.
//
// What is not here: the caches themselves, their byte budgets and admission
// (models/kv/), and the calibration policy beyond "compute the fixed scales
// when told to" (models/kv/kv_format.h documents it). This is the op-table
// side only, so the kernels never include models/.
//
// ---- the layout ----
// A cache is made of regions of S token slots: a block of a paged cache
// (S = block tokens), or one sequence's reservation in a contiguous cache
// (S = its slots; one "block" per sequence). A region holds every layer of the
// rank, one section per layer, each S · layer_token_bytes long:
//
//   section(layer) = region + layer · S · layer_token_bytes
//     K values  (Hkv, S, D)   in the format          at 0
//     V values  (Hkv, S, D)                          at Hkv·S·D·e
//     K scales  (Hkv, S) · c   (per token-head, per group) at 2·Hkv·S·D·e
//     V scales  (Hkv, S) · c                               at 2·Hkv·S·D·e + Hkv·S·c
//
// with e the format's bytes per value (½ for int4: the code of channel d is
// the low nibble of byte d/2 for even d, the high nibble for odd d) and c the
// scale bytes of one token-head: 4 (one fp32 per token-head) or, per group,
// (D / G) · 4 (for each group of G channels an fp16 scale then an fp16 zero point). Head-major inside a block keeps
// each head's keys contiguous for the reading loop. Per-tensor and per-channel scales do not grow with tokens: they
// live outside the regions, per layer (KvCacheView::fixed_scales). Scales may sit at offsets that are not multiples of
// 4 (an odd Hkv·D in 1-byte formats), so they are moved with memcpy, never dereferenced as float*.
//
// ---- token positions and slots ----
// Position p of a sequence (0-based) lives in slot p, or, for a sliding-window
// cache of W slots (a rolling buffer, as Mistral's reference RotatingBufferCache),
// in slot p mod W: the slot of the token W positions back, which the window no
// longer sees. Slot s is in block table entry s / S at offset s mod S.
// Under an eviction policy that keeps a scattered set of positions (attention
// sinks, heavy hitters: models/kv/kv_eviction.h) the sequence's view carries
// its slot map instead (KvSeqView::slot_positions): the position each slot
// holds. Queries then see every slot whose position is at or before theirs.
// K is stored after its rotary embedding, so a kept key keeps its original
// position (as H2O's implementation does; StreamingLLM instead renumbers the
// positions inside its cache).
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/kv_types.h"

namespace gpuledger {

// KvFormat, KvScales and their names: core/kv_types.h.

// ---- scalar codecs ----
// OCP 8-bit floating point, E4M3 (OCP OFP8 spec v1.0, 2023; Micikevicius et al.
// 2022, "FP8 formats for deep learning"): 1 sign, 4 exponent bits (bias 7),
// 3 mantissa bits; no infinities; S.1111.111 (0x7F, 0xFF) is NaN, so the
// largest finite value is S.1111.110 = 1.75 · 2^8 = 448; subnormals are
// m · 2^−9. Encoding rounds to nearest, ties to even, and saturates to ±448
// (inf included), as the "satfinite" conversions of CUDA's __nv_cvt_float_to_fp8 do.
inline constexpr float kFp8E4M3Max = 448.0f;
inline constexpr float kInt8Max = 127.0f;  // symmetric int8: −127 … 127 (−128 unused)

uint8_t fp32_to_fp8_e4m3(float x);
float fp8_e4m3_to_fp32(uint8_t code);
const float* fp8_e4m3_table();  // the 256 decoded values, for fast reads
// Symmetric int8 of an already scaled value: round half to even, clamp to ±127; NaN -> 0.
int8_t fp32_to_int8_sym(float x);

// Asymmetric int4 over a group (KIVI, Liu et al. 2024, its quantization of a
// group: scale = (max − min) / (2^4 − 1), zero point = min, code =
// round((x − min) / scale) in 0 … 15, read as code · scale + min). The scale
// and zero are stored as fp16 and the codes are computed from the stored
// (rounded) values, so write and read agree. Scale: (max − min) / 15 capped at
// 65504 (fp16's largest); 1 when it is 0, not finite, or rounds to 0 in fp16
// (every value of the group then reads as the zero point). Zero: min clamped
// to ±65504. Codes round half to even and clamp to 0 … 15; NaN -> 0.
inline constexpr float kInt4Levels = 15.0f;
struct Int4Group {
  uint16_t scale_fp16 = 0, zero_fp16 = 0;  // as stored
  float scale = 1.0f, zero = 0.0f;         // their fp32 values
};
Int4Group int4_group_params(float min, float max);
uint8_t fp32_to_int4(float x, float scale, float zero);

// The largest magnitude a format holds after scaling: 448 (fp8), 127 (int8), 1 (bf16).
float kv_qmax(KvFormat f);
// Scale mapping amax onto the format's range: amax / qmax. A zero (or
// non-finite) amax gives 1: every value of the group is then 0 (or the group is
// broken anyway), and a scale of 0 would turn later reads into NaN.
float kv_scale_from_amax(float amax, KvFormat f);

// ---- sizes inside a region (see the layout above) ----

// Scale bytes stored beside one token of one KV head, for K (as many for V):
// one fp32 per token-head; per group, D / G (scale, zero) fp16 pairs; else none.
inline constexpr int64_t kv_token_head_scale_bytes(KvFormat f, KvScales s, int64_t D, int64_t group) {
  if (!kv_quantized(f)) return 0;
  if (s == KvScales::kPerTokenHead) return kKvScaleBytes;
  if (s == KvScales::kPerGroup) return group > 0 ? D / group * kKvGroupParamBytes : 0;
  return 0;
}
// Bytes one token costs in one layer: K and V values, plus the scales that
// travel with the token (per token-head or per group).
inline constexpr int64_t kv_layer_token_bytes(KvFormat f, KvScales s, int64_t Hkv, int64_t D,
                                              int64_t group = kKvDefaultGroup) {
  return 2 * Hkv * (kv_values_bytes(f, D) + kv_token_head_scale_bytes(f, s, D, group));
}
// Fixed scales per layer for K (and as many for V): 1 per tensor, Hkv·D per
// channel, none per token-head or for bf16.
inline constexpr int64_t kv_fixed_scales_per_layer(KvFormat f, KvScales s, int64_t Hkv, int64_t D) {
  if (!kv_quantized(f)) return 0;
  return s == KvScales::kPerTensor ? 1 : s == KvScales::kPerChannel ? Hkv * D : 0;
}

// ---- the view the KV ops take ----

// One sequence of a batch. Metadata lives on the host (a device backend
// uploads it, as vLLM builds its block tables on the host and copies them).
struct KvSeqView {
  void* base = nullptr;         // device pointer the block ids count from (paged: the pool;
                                // contiguous: the sequence's reservation); nullptr on meta
  std::vector<int32_t> blocks;  // block table: slot s lives in block blocks[s / block_tokens]
  int64_t len = 0;              // tokens of the sequence, the new ones included
  int64_t n_new = 0;            // new tokens this step: positions len − n_new … len − 1
  // Under a scattered eviction policy: slot s holds position slot_positions[s]
  // (after this step's writes; the new positions among them). Empty: slot(p).
  std::vector<int64_t> slot_positions;
  // When set (H2O), cached_attention adds each slot's attention weight, summed
  // over the query heads and the new queries, to slot_scores[slot] (host
  // memory; the cpu backend).
  float* slot_scores = nullptr;
};

// One layer of a cache, for a batch of sequences.
struct KvCacheView {
  KvFormat format = KvFormat::kBF16;
  KvScales scales = KvScales::kPerTokenHead;
  int64_t Hkv = 0, D = 0;           // KV heads on this rank, head dim
  int64_t group = kKvDefaultGroup;  // channels per scale group (per-group scales)
  int64_t block_tokens = 0;         // S: slots per region
  int64_t block_bytes = 0;          // stride between block ids: S · (all layers' token bytes)
  int64_t layer_offset_bytes = 0;   // this layer's section inside a region
  std::optional<int64_t> window;    // rolling buffer of `window` slots; keys i − window < j ≤ i
  float* fixed_scales = nullptr;    // this layer's K scales, then V scales (per tensor: 1 + 1;
                                    // per channel: Hkv·D + Hkv·D, (Hkv, D)); device pointer
  std::vector<KvSeqView> seqs;

  int64_t row_bytes() const { return kv_values_bytes(format, D); }  // one token-head's D values
  int64_t token_head_scale_bytes() const { return kv_token_head_scale_bytes(format, scales, D, group); }
  int64_t layer_token_bytes() const { return kv_layer_token_bytes(format, scales, Hkv, D, group); }
  int64_t fixed_per_tensor() const { return kv_fixed_scales_per_layer(format, scales, Hkv, D); }
  bool token_scales() const { return kv_quantized(format) && scales == KvScales::kPerTokenHead; }
  bool group_scales() const { return kv_quantized(format) && scales == KvScales::kPerGroup; }

  // Slot of position p (rolling buffer under a window).
  int64_t slot(int64_t p) const { return window ? p % *window : p; }
  // Tokens a sequence of `len` tokens keeps: min(len, window).
  int64_t kept(int64_t len) const { return window && len > *window ? *window : len; }
  // Query i sees keys first_key(i) … i (causal; window: i − window < j).
  int64_t first_key(int64_t i) const { return window && i - *window + 1 > 0 ? i - *window + 1 : 0; }
  // Byte offsets inside a layer section: the values of head h at slot o, and its token-head scale.
  int64_t value_offset(bool is_v, int64_t h, int64_t o) const {
    return (((is_v ? Hkv : 0) + h) * block_tokens + o) * row_bytes();
  }
  int64_t scale_offset(bool is_v, int64_t h, int64_t o) const {
    return 2 * Hkv * block_tokens * row_bytes() +
           (((is_v ? Hkv : 0) + h) * block_tokens + o) * token_head_scale_bytes();
  }
  // Slot of position p of sequence s: its slot map's entry, else slot(p).
  // Throws std::out_of_range when the map does not hold p.
  int64_t slot_of(const KvSeqView& s, int64_t p) const;
  // Slots sequence s holds: its slot map's size, else kept(len).
  int64_t slots_held(const KvSeqView& s) const {
    return s.slot_positions.empty() ? kept(s.len) : static_cast<int64_t>(s.slot_positions.size());
  }
  // The layer section holding slot sl of sequence s (host arithmetic on a device pointer).
  char* section_at(const KvSeqView& s, int64_t sl) const {
    return static_cast<char*>(s.base) + s.blocks[static_cast<size_t>(sl / block_tokens)] * block_bytes +
           layer_offset_bytes;
  }
  // The layer section holding position p of sequence s.
  char* section(const KvSeqView& s, int64_t p) const { return section_at(s, slot_of(s, p)); }
  int64_t new_tokens() const {
    int64_t n = 0;
    for (const auto& s : seqs) n += s.n_new;
    return n;
  }
};

// Checks a view's geometry and every sequence (throws std::invalid_argument
// naming `op`): sizes >= 1, int4 only with per-group scales and per-group
// scales only with int4, an even group dividing D, the section inside the block stride, 0 <= n_new <= len,
// enough blocks for the slots, a slot map (if any) of distinct positions
// before len holding every new one, not combined with a window, and, under a window, that a step is exact:
// a step writing n_new > 1 tokens into a sequence longer than the window would
// overwrite slots that its own earlier queries still read (query len − n_new
// sees keys back to len − n_new − W + 1, and the write of position q evicts
// q − W), so it must carry one token, or end within the window. Pointers are
// not checked (nullptr on meta).
void validate_kv_view(const KvCacheView& c, const char* op);

}  // namespace gpuledger
