// Test helpers for the transformer tests (not a test binary itself): a one-rank
// environment (ledger, device, self TP group), host <-> device copies in any
// dtype, and deterministic random vectors.
#pragma once
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "core/dtype.h"
#include "kernels/device.h"
#include "kernels/ledger.h"
#include "kernels/registry/registry.h"

namespace gpuledger::testing {

struct Env {
  Ledger ledger;
  std::unique_ptr<Device> dev;
  CommCounters counters;
  std::unique_ptr<Comm> tp;
  explicit Env(const std::string& backend = "cpu")
      : dev(make_device(backend, ledger)), tp(make_self_comm("tp", counters, *dev)) {}
};

inline std::vector<float> to_host(Device& dev, const void* p, DType t, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  if (t == DType::kFP32) {
    dev.copy_to_host(out.data(), p, 4 * n);
  } else {
    std::vector<uint16_t> raw(static_cast<size_t>(n));
    dev.copy_to_host(raw.data(), p, 2 * n);
    convert_to_fp32(raw.data(), t, out.data(), n);
  }
  return out;
}

inline void from_host(Device& dev, void* p, DType t, const std::vector<float>& v) {
  const auto n = static_cast<int64_t>(v.size());
  if (t == DType::kFP32) {
    dev.copy_from_host(p, v.data(), 4 * n);
  } else {
    std::vector<uint16_t> raw(v.size());
    convert_from_fp32(v.data(), raw.data(), t, n);
    dev.copy_from_host(p, raw.data(), 2 * n);
  }
}

inline std::vector<float> randn(size_t n, uint32_t seed, float sd = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

inline double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// A few element indices spread over [0, n): deterministic, distinct when n allows.
inline std::vector<int64_t> sample_indices(int64_t n, int64_t k) {
  std::vector<int64_t> out;
  if (n <= k) {
    for (int64_t i = 0; i < n; ++i) out.push_back(i);
    return out;
  }
  for (int64_t i = 0; i < k; ++i) out.push_back((i * n) / k + (i * 7919) % std::max<int64_t>(1, n / k));
  return out;
}

}  // namespace gpuledger::testing
