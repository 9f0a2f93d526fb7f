// FP8 training's vocabulary: the two 8-bit formats, their conversions from and
// to fp32, the recipe a run uses, and the delayed-scaling scale update.
//
// Formats (Micikevicius et al. 2022, "FP8 Formats for Deep Learning", §3, Table 1;
// NVIDIA's __nv_fp8_e4m3 / __nv_fp8_e5m2):
//   E4M3: 1 sign, 4 exponent (bias 7), 3 mantissa; no infinities, NaN = S.1111.111;
//         max normal 448 (0x7E), min normal 2^-6 (0x08), min subnormal 2^-9 (0x01).
//   E5M2: 1 sign, 5 exponent (bias 15), 2 mantissa; IEEE-like (inf 0x7C, NaN 0x7D..0x7F);
//         max normal 57344 (0x7B), min normal 2^-14 (0x04), min subnormal 2^-16 (0x01).
// The conversion from fp32 rounds to nearest even and saturates: a finite value
// (or an infinity) beyond the max normal becomes the max normal with its sign,
// as TransformerEngine's casts do (cvt.rn.satfinite; __NV_SATFINITE). NaN stays NaN.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace gpuledger {

enum class Fp8Format : int { kE4M3 = 0, kE5M2 };

uint8_t fp32_to_fp8(float x, Fp8Format f);
float fp8_to_fp32(uint8_t x, Fp8Format f);
float fp8_max(Fp8Format f);  // 448 | 57344

// The recipe of an fp8 run (--fp8-recipe). kNone: no FP8 GEMMs.
// kDelayed: TransformerEngine's DelayedScaling (common/recipe/__init__.py at
// d0067d0da6cb01811b8072a7d304f0e00344ce2b): per-tensor scales, the HYBRID
// format (E4M3 in the forward, E5M2 for gradients), margin 0, an amax history
// of 1024 entries reduced by "max".
// kBlockwise: TE's Float8BlockScaling (ibid.; DeepSeek-V3, arXiv 2412.19437
// §3.3.2): E4M3 in both passes, one scale per block of kFp8BlockLen — 1 × 128
// tiles of activations and gradients along the GEMM's reduction, 128 × 128
// blocks of weights — each a power of 2 (fp8_block_scale), no amax history.
enum class Fp8Recipe : int { kNone = 0, kDelayed, kBlockwise };
std::string_view fp8_recipe_name(Fp8Recipe r);  // "none" | "delayed" | "blockwise"
std::optional<Fp8Recipe> fp8_recipe_from_name(std::string_view name);
inline constexpr int64_t kTeAmaxHistoryLen = 1024;  // DelayedScaling.amax_history_len's default

// The Linear GEMMs an fp8 run executes in FP8 — the layers' TransformerEngine
// modules under Megatron-LM — by parameter role (models/transformer/param_layout.h),
// and how many GEMMs one tensor of that role is: a routed-expert tensor, which
// stacks the rank's `local_experts` experts, one per expert (TE's GroupedLinear
// keeps each expert's weight, FP8 copies and quantizers apart); the attention
// (QKV or MLA's projections), attention-out, the dense and shared-expert MLPs
// one; any other role 0 — the router (Megatron's TopKRouter: a plain GEMM),
// the LM head and the embedding (not TE modules), norms and biases.
int64_t fp8_gemms_of_role(std::string_view role, int64_t local_experts);

// The blockwise recipe's block length and its scale of a block whose largest
// magnitude is amax: FP8_MAX/amax with its mantissa bits cleared (a power of
// 2, never above FP8_MAX/amax); 1 when amax is 0 or not finite; the largest
// float's power of 2 when FP8_MAX/amax overflows (TE's compute_scale_from_amax,
// common/recipe/recipe_common.cuh, with power-of-2 scales and epsilon 0).
inline constexpr int64_t kFp8BlockLen = 128;
float fp8_block_scale(float amax, Fp8Format f);

// The delayed-scaling update (DelayedScaling's docstring, ibid.):
//   scale = (FP8_MAX / amax) / 2^margin,
// the previous scale kept when amax is 0 or not finite (TE's _default_sf_compute).
float fp8_scale_from_amax(float amax, Fp8Format f, int margin, float previous_scale);

}  // namespace gpuledger
