// E4M3 / E5M2 <-> fp32 (see fp8.h). The conversion rounds |x| on the grid of
// its binade (quantum 2^(E−M), E the unbiased exponent clamped below at the
// format's min normal exponent, which gives the subnormals) to nearest even in
// double precision, where the scaling by a power of two is exact; then
// saturates and packs the bits.
#include "core/fp8.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace gpuledger {
namespace {

struct Fp8Bits {
  int exponent_bits, mantissa_bits, bias;
  double max_normal;
  uint8_t nan;  // the NaN written for a NaN input (sign added)
};

constexpr Fp8Bits bits_of(Fp8Format f) {
  return f == Fp8Format::kE4M3 ? Fp8Bits{4, 3, 7, 448.0, 0x7F} : Fp8Bits{5, 2, 15, 57344.0, 0x7F};
}

}  // namespace

float fp8_max(Fp8Format f) { return static_cast<float>(bits_of(f).max_normal); }

uint8_t fp32_to_fp8(float x, Fp8Format f) {
  const Fp8Bits b = bits_of(f);
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  if (std::isnan(x)) return static_cast<uint8_t>(sign | b.nan);
  double a = std::fabs(static_cast<double>(x));
  if (a == 0.0) return sign;
  const int min_exp = 1 - b.bias;  // the min normal's unbiased exponent
  int e = std::ilogb(a);           // floor(log2 a) (a finite or inf)
  if (std::isinf(a) || e > 64) e = 64;
  const int grid_exp = (e < min_exp ? min_exp : e) - b.mantissa_bits;
  a = std::nearbyint(std::ldexp(a, -grid_exp));  // default rounding mode: to nearest, ties to even
  a = std::ldexp(a, grid_exp);
  if (a > b.max_normal) a = b.max_normal;  // saturate (satfinite)
  if (a == 0.0) return sign;
  const int re = std::ilogb(a);
  if (re < min_exp) {  // subnormal: exponent field 0, mantissa a / 2^(min_exp − M)
    return static_cast<uint8_t>(sign | static_cast<int>(std::ldexp(a, b.mantissa_bits - min_exp)));
  }
  const int mant = static_cast<int>(std::ldexp(a, b.mantissa_bits - re)) - (1 << b.mantissa_bits);
  return static_cast<uint8_t>(sign | ((re + b.bias) << b.mantissa_bits) | mant);
}

float fp8_to_fp32(uint8_t x, Fp8Format f) {
  const Fp8Bits b = bits_of(f);
  const bool neg = (x & 0x80) != 0;
  const int field = (x & 0x7F) >> b.mantissa_bits;
  const int mant = x & ((1 << b.mantissa_bits) - 1);
  const int top = (1 << b.exponent_bits) - 1;
  double v = 0.0;
  if (f == Fp8Format::kE4M3 && field == top && mant == (1 << b.mantissa_bits) - 1) {
    v = std::nan("");
  } else if (f == Fp8Format::kE5M2 && field == top) {
    v = mant == 0 ? INFINITY : std::nan("");
  } else if (field == 0) {
    v = std::ldexp(static_cast<double>(mant), 1 - b.bias - b.mantissa_bits);
  } else {
    v = std::ldexp(static_cast<double>(mant + (1 << b.mantissa_bits)), field - b.bias - b.mantissa_bits);
  }
  return static_cast<float>(neg ? -v : v);
}

std::string_view fp8_recipe_name(Fp8Recipe r) {
  switch (r) {
    case Fp8Recipe::kNone: return "none";
    case Fp8Recipe::kDelayed: return "delayed";
    case Fp8Recipe::kBlockwise: return "blockwise";
  }
  return "?";
}

std::optional<Fp8Recipe> fp8_recipe_from_name(std::string_view name) {
  for (Fp8Recipe r : {Fp8Recipe::kNone, Fp8Recipe::kDelayed, Fp8Recipe::kBlockwise})
    if (fp8_recipe_name(r) == name) return r;
  return std::nullopt;
}

int64_t fp8_gemms_of_role(std::string_view role, int64_t local_experts) {
  static constexpr std::string_view kOneGemm[] = {
      "qkv.weight",           "attn_out.weight",       "mlp_in.weight",     "mlp_gate.weight",
      "mlp_up.weight",        "mlp_out.weight",        "mla.q_down.weight", "mla.q_up.weight",
      "mla.q.weight",         "mla.kv_down.weight",    "mla.kv_up.weight",  "moe.shared.gate.weight",
      "moe.shared.up.weight", "moe.shared.down.weight"};
  static constexpr std::string_view kPerExpert[] = {"moe.experts.gate.weight", "moe.experts.up.weight",
                                                    "moe.experts.down.weight"};
  for (std::string_view r : kPerExpert)
    if (role == r) return local_experts;
  for (std::string_view r : kOneGemm)
    if (role == r) return 1;
  return 0;
}

float fp8_block_scale(float amax, Fp8Format f) {
  if (!(amax > 0.0f) || !std::isfinite(amax)) return 1.0f;
  float scale = fp8_max(f) / amax;
  if (std::isinf(scale)) scale = std::numeric_limits<float>::max();
  uint32_t bits = 0;
  std::memcpy(&bits, &scale, sizeof bits);
  bits &= 0xFF800000u;  // sign and exponent: the power of 2 at or below
  std::memcpy(&scale, &bits, sizeof bits);
  return scale;
}

float fp8_scale_from_amax(float amax, Fp8Format f, int margin, float previous_scale) {
  if (!(amax > 0.0f) || !std::isfinite(amax)) return previous_scale;
  return fp8_max(f) / amax / std::ldexp(1.0f, margin);  // in fp32, as TE computes it
}

}  // namespace gpuledger
