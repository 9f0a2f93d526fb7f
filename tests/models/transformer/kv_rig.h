// Helpers for the KV-cache tests (not a test binary): the analytic options for a
// KV geometry, host <-> device copies in a compute dtype, and deterministic
// random vectors. The analytic side is only ever called from tests, never from
// models/kv.
#pragma once
#include <cstdint>
#include <vector>

#include "analytic/kv_cache.h"
#include "core/dtype.h"
#include "kernels/device.h"
#include "models/kv/kv_format.h"
#include "tests/models/transformer/harness.h"

namespace gpuledger::kv::testing {

inline analytic::KvOptions analytic_options(KvLayout layout, const KvGeometry& g, int64_t block = 16,
                                            int64_t max_model_len = 0) {
  analytic::KvOptions o;
  o.layout = layout;
  o.dtype = g.format;
  o.scales = g.scales;
  o.group = g.group;
  o.block = block;
  o.max_model_len = max_model_len;
  return o;
}

using gpuledger::testing::randn;  // tests/models/transformer/harness.h

// Values rounded to t, so the device and a double reference read the same numbers.
inline std::vector<float> rounded(std::vector<float> v, DType t) {
  if (t == DType::kFP32) return v;
  std::vector<uint16_t> raw(v.size());
  convert_from_fp32(v.data(), raw.data(), t, static_cast<int64_t>(v.size()));
  convert_to_fp32(raw.data(), t, v.data(), static_cast<int64_t>(v.size()));
  return v;
}

// A device buffer (workspace account) holding v in dtype t.
inline Buffer upload(Device& dev, const std::vector<float>& v, DType t) {
  const auto n = static_cast<int64_t>(v.size());
  Buffer b = dev.alloc(n * dtype_bytes(t), Account::kWorkspace, "test.input");
  if (t == DType::kFP32) {
    dev.copy_from_host(b.data(), v.data(), 4 * n);
  } else {
    std::vector<uint16_t> raw(v.size());
    convert_from_fp32(v.data(), raw.data(), t, n);
    dev.copy_from_host(b.data(), raw.data(), 2 * n);
  }
  return b;
}

inline std::vector<float> download(Device& dev, const Buffer& b, DType t, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  if (t == DType::kFP32) {
    dev.copy_to_host(out.data(), b.data(), 4 * n);
  } else {
    std::vector<uint16_t> raw(static_cast<size_t>(n));
    dev.copy_to_host(raw.data(), b.data(), 2 * n);
    convert_to_fp32(raw.data(), t, out.data(), n);
  }
  return out;
}

}  // namespace gpuledger::kv::testing
