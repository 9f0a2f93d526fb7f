// KV formats on the measured side (models/kv/kv_format.h): per-token and
// fixed scale bytes, the rank's geometry from the model and layout, and the
// host quantize/dequantize of a (tokens, heads, dim) tensor under each scale
// granularity — written from the rules, not from the device kernels, so the
// tests can hold one against the other.
#include "models/kv/kv_format.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "core/dtype.h"

namespace gpuledger::kv {

// ---- bytes ----

int64_t KvGeometry::scale_bytes_per_token() const {
  // Per token-head scales travel with the token: one K and one V scale per
  // layer per KV head (docs/formulas/kv.md, "Quantized caches: scales").
  // Per group: an fp16 scale and zero point per G channels of each head.
  if (!kv_quantized(format)) return 0;
  if (scales == KvScales::kPerGroup) return 2 * layers * kv_heads * (head_dim / group) * kKvGroupParamBytes;
  if (scales != KvScales::kPerTokenHead) return 0;
  return 2 * layers * kv_heads * kKvScaleBytes;
}

KvGeometry kv_geometry(const ModelConfig& m, const Layout& layout, KvFormat format, KvScales scales, int64_t stage,
                       int64_t group) {
  KvGeometry g;
  g.layers = layers_on_stage(m, layout, stage);
  g.kv_heads = kv_heads_on_rank(m.kv_heads, layout.tp);
  g.head_dim = m.head_dim;
  g.format = format;
  g.scales = scales;
  g.group = group;
  return g;
}

// ---- host quantization ----

namespace {

// Index of the scale covering value (t, h, d).
int64_t scale_index(const QuantizedKv& q, int64_t t, int64_t h, int64_t d) {
  switch (q.scales) {
    case KvScales::kPerTensor: return 0;
    case KvScales::kPerTokenHead: return t * q.heads + h;
    case KvScales::kPerChannel: return h * q.dim + d;
    case KvScales::kPerGroup: return (t * q.heads + h) * (q.dim / q.group) + d / q.group;
  }
  return 0;
}

int64_t scale_count(const QuantizedKv& q) {
  switch (q.scales) {
    case KvScales::kPerTensor: return 1;
    case KvScales::kPerTokenHead: return q.tokens * q.heads;
    case KvScales::kPerChannel: return q.heads * q.dim;
    case KvScales::kPerGroup: return q.tokens * q.heads * (q.dim / q.group);
  }
  return 0;
}

// int4 per group: min and max of each group, the fp16 scale and zero point
// (int4_group_params), then the codes from the stored values, two per byte.
void quantize_int4(const float* x, QuantizedKv& q) {
  const size_t groups = static_cast<size_t>(scale_count(q));
  std::vector<float> mn(groups, 0.0f), mx(groups, 0.0f);
  std::vector<bool> seen(groups, false);
  for (int64_t i = 0; i < q.tokens * q.heads * q.dim; ++i) {
    const size_t g = static_cast<size_t>(i / q.group);  // groups are consecutive channels of a row
    mn[g] = seen[g] ? std::min(mn[g], x[i]) : x[i];
    mx[g] = seen[g] ? std::max(mx[g], x[i]) : x[i];
    seen[g] = true;
  }
  q.scale_values.resize(groups);
  q.zero_values.resize(groups);
  for (size_t g = 0; g < groups; ++g) {
    const Int4Group p = int4_group_params(mn[g], mx[g]);
    q.scale_values[g] = p.scale;
    q.zero_values[g] = p.zero;
  }
  for (int64_t i = 0; i < q.tokens * q.heads * q.dim; ++i) {
    const size_t g = static_cast<size_t>(i / q.group);
    const uint8_t c = fp32_to_int4(x[i], q.scale_values[g], q.zero_values[g]);
    q.codes[static_cast<size_t>(i / 2)] |= static_cast<uint8_t>(c << (4 * (i % 2)));
  }
}

}  // namespace

QuantizedKv quantize_kv(const float* x, int64_t tokens, int64_t heads, int64_t dim, KvFormat format, KvScales scales,
                        int64_t group) {
  if (tokens < 0 || heads < 1 || dim < 1)
    throw std::invalid_argument("quantize_kv: bad shape (tokens, heads, dim) = (" + std::to_string(tokens) + ", " +
                                std::to_string(heads) + ", " + std::to_string(dim) + ")");
  if ((format == KvFormat::kInt4) != (scales == KvScales::kPerGroup) ||
      (format == KvFormat::kInt4 && (group < 2 || group % 2 != 0 || dim % group != 0)))
    throw std::invalid_argument("quantize_kv: int4 takes per-group scales with an even group dividing dim (group " +
                                std::to_string(group) + ", dim " + std::to_string(dim) + ")");
  QuantizedKv q;
  q.format = format;
  q.scales = scales;
  q.tokens = tokens;
  q.heads = heads;
  q.dim = dim;
  q.group = group;
  const int64_t n = tokens * heads * dim;
  q.codes.assign(static_cast<size_t>(kv_values_bytes(format, n)), 0);
  if (format == KvFormat::kInt4) {
    quantize_int4(x, q);
    return q;
  }
  if (!kv_quantized(format)) {
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t b = fp32_to_bf16(x[i]);
      std::memcpy(q.codes.data() + 2 * i, &b, 2);
    }
    return q;
  }
  // amax per group, then scale = amax / qmax (kv_scale_from_amax).
  std::vector<float> amax(static_cast<size_t>(scale_count(q)), 0.0f);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t d = 0; d < dim; ++d) {
        float& m = amax[static_cast<size_t>(scale_index(q, t, h, d))];
        m = std::max(m, std::fabs(x[(t * heads + h) * dim + d]));
      }
  q.scale_values.resize(amax.size());
  for (size_t g = 0; g < amax.size(); ++g) q.scale_values[g] = kv_scale_from_amax(amax[g], format);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t d = 0; d < dim; ++d) {
        const int64_t i = (t * heads + h) * dim + d;
        const float y = x[i] / q.scale_values[static_cast<size_t>(scale_index(q, t, h, d))];
        q.codes[static_cast<size_t>(i)] =
            format == KvFormat::kFP8E4M3 ? fp32_to_fp8_e4m3(y) : static_cast<uint8_t>(fp32_to_int8_sym(y));
      }
  return q;
}

std::vector<float> dequantize_kv(const QuantizedKv& q) {
  const int64_t n = q.tokens * q.heads * q.dim;
  std::vector<float> out(static_cast<size_t>(n));
  if (!kv_quantized(q.format)) {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t b;
      std::memcpy(&b, q.codes.data() + 2 * i, 2);
      out[static_cast<size_t>(i)] = bf16_to_fp32(b);
    }
    return out;
  }
  if (q.format == KvFormat::kInt4) {
    for (int64_t i = 0; i < n; ++i) {
      const size_t g = static_cast<size_t>(i / q.group);
      const int c = (q.codes[static_cast<size_t>(i / 2)] >> (4 * (i % 2))) & 0xF;
      out[static_cast<size_t>(i)] = static_cast<float>(c) * q.scale_values[g] + q.zero_values[g];
    }
    return out;
  }
  for (int64_t t = 0; t < q.tokens; ++t)
    for (int64_t h = 0; h < q.heads; ++h)
      for (int64_t d = 0; d < q.dim; ++d) {
        const int64_t i = (t * q.heads + h) * q.dim + d;
        const uint8_t c = q.codes[static_cast<size_t>(i)];
        const float v =
            q.format == KvFormat::kFP8E4M3 ? fp8_e4m3_to_fp32(c) : static_cast<float>(static_cast<int8_t>(c));
        out[static_cast<size_t>(i)] = v * q.scale_values[static_cast<size_t>(scale_index(q, t, h, d))];
      }
  return out;
}

}  // namespace gpuledger::kv
