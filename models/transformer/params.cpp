// Params (see params.h): allocation per unit and the layout-independent
// deterministic initialisation.
#include "models/transformer/params.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <thread>

#include "kernels/philox.h"

namespace gpuledger {
namespace {

// Elements 2k and 2k+1 of the full tensor `id`: a pair of standard normals by
// Box–Muller (Box & Muller 1958) from Philox block k — the cos and sin halves
// of the same draw. u1 is taken in (0, 1) (never 0: log would be −inf).
// Single precision: the draws are host-only and need no more (≈ 2× faster than
// double for a 7B-shaped layer's 2·10⁸ elements).
struct NormalPair {
  float z0, z1;
};
NormalPair philox_normal_pair(uint64_t key, uint64_t id, uint64_t k) {
  const Philox4x32Block b = philox_block(key, id, k);
  const float u1 = (static_cast<float>(b.w[0] >> 8) + 0.5f) * (1.0f / 16777216.0f);
  const float u2 = static_cast<float>(b.w[1] >> 8) * (1.0f / 16777216.0f);
  const float r = std::sqrt(-2.0f * std::log(u1));
  const float a = 2.0f * std::numbers::pi_v<float> * u2;
  return {r * std::cos(a), r * std::sin(a)};
}

void init_tensor(const TensorSlot& t, uint64_t key, double resid_scale, float* out) {
  const int64_t n = t.elems();
  switch (t.init) {
    case ParamInit::kOnes: std::fill(out, out + n, 1.0f); return;
    case ParamInit::kZeros: std::fill(out, out + n, 0.0f); return;
    case ParamInit::kNormal:
    case ParamInit::kResidualNormal: break;
  }
  const float sd = static_cast<float>(Params::kInitStd * (t.init == ParamInit::kResidualNormal ? resid_scale : 1.0));
  // Rows in parallel: a 7B-shaped layer has ~2·10⁸ elements to draw.
  const int64_t threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 16);
  auto rows = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* row = out + r * t.cols;
      const auto g = global_row(t, r);
      if (!g) {  // padded vocabulary row
        std::fill(row, row + t.cols, 0.0f);
        continue;
      }
      const uint64_t base = static_cast<uint64_t>(*g * t.full_cols + t.col_begin);
      for (int64_t c = 0; c < t.cols;) {
        const uint64_t i = base + static_cast<uint64_t>(c);
        const NormalPair z = philox_normal_pair(key, t.tensor_id, i >> 1);
        if ((i & 1) == 0 && c + 1 < t.cols) {  // both halves land in this row
          row[c] = sd * z.z0;
          row[c + 1] = sd * z.z1;
          c += 2;
        } else {
          row[c] = sd * ((i & 1) ? z.z1 : z.z0);
          c += 1;
        }
      }
    }
  };
  if (threads == 1 || n < (1 << 16)) {
    rows(0, t.rows);
    return;
  }
  std::vector<std::thread> pool;
  const int64_t per = (t.rows + threads - 1) / threads;
  for (int64_t k = 0; k < threads; ++k) {
    const int64_t r0 = k * per, r1 = std::min(t.rows, r0 + per);
    if (r0 < r1) pool.emplace_back(rows, r0, r1);
  }
  for (auto& th : pool) th.join();
}

}  // namespace

std::vector<float> init_unit_values(const UnitLayout& unit, uint64_t seed, int64_t total_layers) {
  std::vector<float> v(static_cast<size_t>(unit.elems));
  const uint64_t key = seed ^ Params::kInitSeedSalt;
  const double resid_scale = 1.0 / std::sqrt(2.0 * static_cast<double>(total_layers));
  for (const auto& t : unit.tensors) init_tensor(t, key, resid_scale, v.data() + t.offset);
  return v;
}

Params::Params(Device& device, ParamLayout layout, DType weight_type, DType grad_type, ParamSharding sharding)
    : device_(device), layout_(std::move(layout)), weight_t_(weight_type), grad_t_(grad_type), sharding_(sharding) {
  const int64_t gb = dtype_bytes(grad_t_);
  int64_t largest_padded = 0;
  for (const auto& u : layout_.units) {
    shards_.push_back(unit_shard(u, sharding_.groups));
    const int64_t shard = shards_.back().shard_elems;
    largest_padded = std::max(largest_padded, shards_.back().padded_elems);
    weights_.push_back(device_.alloc((sharding_.weights ? shard : u.elems) * dtype_bytes(weight_t_), Account::kWeights,
                                     u.name + ".weights"));
    grads_.push_back(device_.alloc((sharding_.grads ? shard : u.elems) * gb, Account::kGrads, u.name + ".grads"));
  }
  gathered_.resize(layout_.units.size());
  if (sharding_.grads) grad_staging_ = device_.alloc(gb * largest_padded, Account::kComm, "zero.grad_staging");
  zero_grads();
}

void Params::initialise(uint64_t seed, int64_t total_layers,
                        const std::function<void(size_t, const std::vector<float>&)>& each_unit) {
  initialise_from([&](const UnitLayout& unit) { return init_unit_values(unit, seed, total_layers); }, each_unit);
}

void Params::initialise_from(const UnitValues& values,
                             const std::function<void(size_t, const std::vector<float>&)>& each_unit) {
  if (!device_.touches_memory()) return;
  std::vector<char> host;
  for (size_t u = 0; u < layout_.units.size(); ++u) {
    const std::vector<float> v = values(layout_.units[u]);
    if (sharding_.weights) {  // the rank's shard of each part of the unit, padding 0
      const UnitShard& sh = shards_[u];
      const int64_t shard = sh.shard_elems;
      std::vector<float> part(static_cast<size_t>(shard), 0.0f);
      for (const ShardPart& p : sh.parts)
        std::copy(v.begin() + p.begin, v.begin() + p.begin + p.valid, part.begin() + p.shard_at);
      host.resize(static_cast<size_t>(shard * dtype_bytes(weight_t_)));
      convert_from_fp32(part.data(), host.data(), weight_t_, shard);
      device_.copy_from_host(weights_[u].data(), host.data(), static_cast<int64_t>(host.size()));
      if (each_unit) each_unit(u, v);
      continue;
    }
    const int64_t n = static_cast<int64_t>(v.size());
    if (weight_t_ == DType::kFP32) {
      device_.copy_from_host(weights_[u].data(), v.data(), n * 4);
    } else {
      host.resize(static_cast<size_t>(n * dtype_bytes(weight_t_)));
      convert_from_fp32(v.data(), host.data(), weight_t_, n);
      device_.copy_from_host(weights_[u].data(), host.data(), static_cast<int64_t>(host.size()));
    }
    if (each_unit) each_unit(u, v);
  }
}

void* Params::grad_at(size_t unit, const TensorSlot& t) const {
  if (!sharding_.grads) return byte_offset(grads_[unit].data(), t.offset * dtype_bytes(grad_t_));
  return byte_offset(grad_staging_.data(), shards_[unit].padded_offset(t.offset) * dtype_bytes(grad_t_));
}

void* Params::weight_at(size_t unit, const TensorSlot& t) const {
  if (!sharding_.weights) return byte_offset(weights_[unit].data(), t.offset * dtype_bytes(weight_t_));
  return byte_offset(gathered_[unit].data(), shards_[unit].padded_offset(t.offset) * dtype_bytes(weight_t_));
}

void* Params::weight_or_null(size_t unit, std::string_view role) const {
  const TensorSlot* t = layout_.units[unit].find(role);
  return t == nullptr ? nullptr : weight_at(unit, *t);
}

void* Params::grad_or_null(size_t unit, std::string_view role) const {
  const TensorSlot* t = layout_.units[unit].find(role);
  return t == nullptr ? nullptr : grad_at(unit, *t);
}

void* Params::weight(size_t unit, std::string_view role) const { return weight_at(unit, layout_.units[unit].at(role)); }

void* Params::grad(size_t unit, std::string_view role) const { return grad(unit, layout_.units[unit].at(role)); }

void* Params::grad(size_t unit, const TensorSlot& t) const { return grad_at(unit, t); }

void Params::zero_grads() {
  for (auto& g : grads_) device_.fill_zero(g.data(), g.bytes());
}

}  // namespace gpuledger
