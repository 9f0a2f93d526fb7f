// KV storage formats (kernels/kv_storage.h): names, the OCP FP8 E4M3 and
// symmetric int8 codecs, scale-from-amax, and the checks every KV op runs on
// its view. Host code shared by the cpu and meta backends.
#include "kernels/kv_storage.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "core/dtype.h"

namespace gpuledger {

// ---- codecs ----

uint8_t fp32_to_fp8_e4m3(float x) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  if (std::isnan(x)) return sign | 0x7F;
  const float a = std::fabs(x);
  // No infinity in E4M3: everything at or beyond the largest finite value saturates.
  if (a >= kFp8E4M3Max) return sign | 0x7E;
  // Below the smallest normal 2^−6 the grid is m · 2^−9 (m = 0 … 7); a·2^9 is
  // exact, and nearbyint rounds half to even in the default rounding mode. m = 8
  // is 2^−6, whose code 0x08 (exponent 1, mantissa 0) is again just m.
  if (a < 0.015625f) return sign | static_cast<uint8_t>(std::nearbyint(a * 512.0f));
  // Normal: a = q · 2^(E − 3) with q = 8 … 15 (1.mmm), E the unbiased exponent.
  int e2 = 0;
  std::frexp(a, &e2);  // a ∈ [2^(e2−1), 2^e2)
  int E = e2 - 1;
  int q = static_cast<int>(std::nearbyint(std::ldexp(a, 3 - E)));  // exact scaling, RNE
  if (q == 16) {                                                   // rounded up into the next binade
    q = 8;
    ++E;
  }
  // a < 448 keeps E ≤ 8 and, at E = 8, q ≤ 14 (a·2^−5 < 14): never the NaN pattern.
  return sign | static_cast<uint8_t>(((E + 7) << 3) | (q - 8));
}

float fp8_e4m3_to_fp32(uint8_t c) {
  const float sign = (c & 0x80) ? -1.0f : 1.0f;
  const int e = (c >> 3) & 0xF, m = c & 0x7;
  if (e == 15 && m == 7) return std::copysign(std::numeric_limits<float>::quiet_NaN(), sign);
  if (e == 0) return sign * std::ldexp(static_cast<float>(m), -9);  // subnormal m·2^−9
  return sign * std::ldexp(static_cast<float>(8 + m), e - 10);      // 1.mmm · 2^(e−7)
}

const float* fp8_e4m3_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int c = 0; c < 256; ++c) t[c] = fp8_e4m3_to_fp32(static_cast<uint8_t>(c));
    return t;
  }();
  return table.data();
}

int8_t fp32_to_int8_sym(float x) {
  if (std::isnan(x)) return 0;
  return static_cast<int8_t>(std::clamp(std::nearbyint(x), -kInt8Max, kInt8Max));
}

Int4Group int4_group_params(float min, float max) {
  constexpr float kFp16Max = 65504.0f;
  float scale = (max - min) / kInt4Levels;
  if (!(scale > 0.0f) || !std::isfinite(scale)) scale = 1.0f;
  Int4Group g;
  g.scale_fp16 = fp32_to_fp16(std::min(scale, kFp16Max));
  g.scale = fp16_to_fp32(g.scale_fp16);
  if (!(g.scale > 0.0f)) {  // below fp16's smallest subnormal
    g.scale_fp16 = fp32_to_fp16(1.0f);
    g.scale = 1.0f;
  }
  g.zero_fp16 = fp32_to_fp16(std::isnan(min) ? 0.0f : std::clamp(min, -kFp16Max, kFp16Max));
  g.zero = fp16_to_fp32(g.zero_fp16);
  return g;
}

uint8_t fp32_to_int4(float x, float scale, float zero) {
  const float q = (x - zero) / scale;
  if (std::isnan(q)) return 0;
  return static_cast<uint8_t>(std::clamp(std::nearbyint(q), 0.0f, kInt4Levels));
}

float kv_qmax(KvFormat f) {
  switch (f) {
    case KvFormat::kFP8E4M3: return kFp8E4M3Max;
    case KvFormat::kInt8: return kInt8Max;
    case KvFormat::kInt4: return kInt4Levels;
    case KvFormat::kBF16: return 1.0f;
  }
  return 1.0f;
}

float kv_scale_from_amax(float amax, KvFormat f) {
  if (!(amax > 0.0f) || !std::isfinite(amax)) return 1.0f;
  const float s = amax / kv_qmax(f);
  return s > 0.0f ? s : 1.0f;  // a subnormal amax could underflow to 0
}

// ---- slots ----

int64_t KvCacheView::slot_of(const KvSeqView& s, int64_t p) const {
  if (s.slot_positions.empty()) return slot(p);
  const auto n = static_cast<int64_t>(s.slot_positions.size());
  if (p >= 0 && p < n && s.slot_positions[static_cast<size_t>(p)] == p) return p;  // not yet evicted
  for (int64_t sl = 0; sl < n; ++sl)
    if (s.slot_positions[static_cast<size_t>(sl)] == p) return sl;
  throw std::out_of_range("KV slot map holds no position " + std::to_string(p));
}

// ---- view checks ----

namespace {

template <class Fail>
void check_slot_map(const KvCacheView& c, const KvSeqView& s, const std::string& who, const Fail& fail) {
  if (c.window) fail(who + ": a slot map and a rolling-buffer window together");
  std::vector<int64_t> sorted = s.slot_positions;
  std::sort(sorted.begin(), sorted.end());
  if (sorted.front() < 0 || sorted.back() >= s.len)
    fail(who + ": slot map positions must lie in [0, " + std::to_string(s.len) + ")");
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) fail(who + ": slot map holds a position twice");
  // The new positions are the last n_new of the sequence, so the largest ones.
  const auto n = static_cast<int64_t>(sorted.size());
  if (s.n_new > n) fail(who + ": " + std::to_string(s.n_new) + " new tokens, " + std::to_string(n) + " slots");
  for (int64_t r = 0; r < s.n_new; ++r)
    if (sorted[static_cast<size_t>(n - s.n_new + r)] != s.len - s.n_new + r)
      fail(who + ": slot map lacks new position " + std::to_string(s.len - s.n_new + r));
  // As under a window: a step of several tokens is exact only when none of
  // them evicts a key its own earlier queries read — when nothing is evicted.
  if (s.n_new > 1 && n < s.len)
    fail(who + ": a step of " + std::to_string(s.n_new) + " tokens into a sequence of " + std::to_string(s.len) +
         " holding " + std::to_string(n) + " (evicting): write one token per step once the budget is reached");
}

}  // namespace

void validate_kv_view(const KvCacheView& c, const char* op) {
  auto fail = [&](const std::string& msg) { throw std::invalid_argument(std::string(op) + ": " + msg); };
  if (c.Hkv < 1 || c.D < 1 || c.block_tokens < 1)
    fail("bad cache geometry (Hkv, D, block tokens) = (" + std::to_string(c.Hkv) + ", " + std::to_string(c.D) + ", " +
         std::to_string(c.block_tokens) + ")");
  if (c.layer_offset_bytes < 0 || c.layer_offset_bytes + c.block_tokens * c.layer_token_bytes() > c.block_bytes)
    fail("the layer section [" + std::to_string(c.layer_offset_bytes) + ", +" +
         std::to_string(c.block_tokens * c.layer_token_bytes()) + ") does not fit in a block of " +
         std::to_string(c.block_bytes) + " bytes");
  if ((c.format == KvFormat::kInt4) != (c.scales == KvScales::kPerGroup))
    fail(std::string("format ") + std::string(kv_format_name(c.format)) + " with " +
         std::string(kv_scales_name(c.scales)) + " scales: int4 is stored with per-group scales, and only int4");
  if (c.group_scales() && (c.group < 2 || c.group % 2 != 0 || c.D % c.group != 0))
    fail("scale group " + std::to_string(c.group) + " must be even and divide the head dim " + std::to_string(c.D));
  if (c.window && *c.window < 1) fail("window must be >= 1, got " + std::to_string(*c.window));
  for (size_t b = 0; b < c.seqs.size(); ++b) {
    const KvSeqView& s = c.seqs[b];
    const std::string who = "sequence " + std::to_string(b);
    if (s.len < 0 || s.n_new < 0 || s.n_new > s.len)
      fail(who + ": need 0 <= n_new <= len, got n_new " + std::to_string(s.n_new) + ", len " + std::to_string(s.len));
    if (!s.slot_positions.empty()) check_slot_map(c, s, who, fail);
    const int64_t need = (c.slots_held(s) + c.block_tokens - 1) / c.block_tokens;
    if (static_cast<int64_t>(s.blocks.size()) < need)
      fail(who + ": " + std::to_string(s.len) + " tokens need " + std::to_string(need) + " blocks, the table has " +
           std::to_string(s.blocks.size()));
    for (int32_t id : s.blocks)
      if (id < 0) fail(who + ": negative block id " + std::to_string(id));
    if (c.window && s.n_new > 1 && s.len > *c.window)
      fail(who + ": a step of " + std::to_string(s.n_new) + " tokens ending at " + std::to_string(s.len) +
           " exceeds the window " + std::to_string(*c.window) +
           ": its writes would evict keys its own earlier queries read (write one token, or "
           "end the step within the window)");
  }
}

}  // namespace gpuledger
