// The op classes' achieved bandwidths on the CPU backend (see calibrate_op_classes.h).
#include "bench/run/calibrate_op_classes.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <tuple>

#include "bench/host_cpu.h"
#include "bench/median.h"
#include "bench/peak.h"
#include "kernels/op_bytes.h"

namespace gpuledger::bench {
namespace {

using perf::OpClass;

constexpr float kEps = 1e-5f;
constexpr float kDropout = 0.1f;
constexpr int64_t kSoftmaxHeadDim = 32;  // sets only the scale the scores are multiplied by
constexpr int64_t kHeadDim = 32;         // the small models' head width (gpuledger models)

// What is written between two timed calls of an op. The optimizer update
// streams the master weights and the moments, which nothing else touches, once
// per step: none of them is in any cache, so the last-level cache is written
// over too (at most 1 GiB). Every other op reads what the step wrote recently
// (an activation, the backward's gradients) from L3 at least: bench/peak.h's
// eviction of the cores' L2.
int64_t evict_bytes(std::string_view op) {
  if (op != "adamw") return kCacheEvictBytes;
  static const int64_t llc = last_level_cache_bytes();
  return std::clamp<int64_t>(llc + kCacheEvictBytes, kCacheEvictBytes, int64_t{1} << 30);
}

// Times one op and records it.
struct Timer {
  Device& dev;
  const OpClassCalibration& c;
  std::ostream& progress;
  std::vector<OpTiming>& out;
  int size_index = 0;  // the size being timed: its index in the calibration's lists
  void operator()(OpClass cls, const char* op, DType t, const std::string& size, int64_t bytes,
                  const std::function<void()>& f) {
    const double s = time_median_cold(dev, c.warmup, c.reps, f, evict_bytes(op));
    out.push_back({cls, op, t, bytes, s, size_index});
    progress << fmt::format("calibrate: {} {} {} {}: {:.3g} us, {:.3g} GB/s\n", perf::op_class_name(cls), op,
                            dtype_name(t), size, s * 1e6, s > 0 ? static_cast<double>(bytes) / s / 1e9 : 0.0);
  }
};

// Device::copy and the attention's layout copies over N rows × C columns of
// t, the rows as (1, N tokens, heads of 32): x the source, z a destination.
void time_layout_copies(Timer& time, int64_t N, int64_t C, DType t, Buffer& x, Buffer& z) {
  Device& dev = time.dev;
  const int64_t n = N * C, e = dtype_bytes(t);
  const int64_t heads = std::max<int64_t>(1, C / kHeadDim);
  const std::string size = fmt::format("{}x{}", N, C);
  time(OpClass::kCopy, "copy", t, size, layout_copy_bytes(n, t), [&] { dev.copy(z.data(), x.data(), n * e); });
  // The attention's layout copies, the rows as (1, N tokens, heads × 32).
  AttnShape a;
  a.B = 1;
  a.Hq = a.Hkv = heads;
  a.T = N;
  a.D = C / heads;
  time(OpClass::kCopy, "merge_heads", t, size, layout_copy_bytes(n, t),
       [&] { dev.merge_heads(z.data(), x.data(), t, a); });
  time(OpClass::kCopy, "split_heads", t, size, layout_copy_bytes(n, t),
       [&] { dev.split_heads(z.data(), x.data(), t, a); });
  Buffer qkv = dev.alloc(3 * n * e, Account::kWorkspace, "calibrate.qkv");
  Buffer split = dev.alloc(3 * n * e, Account::kWorkspace, "calibrate.split");
  fill_values(dev, qkv, t, 3 * n);
  char* q = static_cast<char*>(split.data());
  time(OpClass::kCopy, "split_qkv", t, size, layout_copy_bytes(3 * n, t),
       [&] { dev.split_qkv(q, q + n * e, q + 2 * n * e, qkv.data(), t, a); });
  time(OpClass::kCopy, "merge_qkv_grad", t, size, layout_copy_bytes(3 * n, t),
       [&] { dev.merge_qkv_grad(qkv.data(), q, q + n * e, q + 2 * n * e, t, a); });
}

// The ops over rows × columns in dtype t: norms, activations, the optimizer
// and the copies (cross-entropy, fp32 only, is timed once per size by the caller).
void time_rows(Timer& time, int64_t N, int64_t C, DType t) {
  Device& dev = time.dev;
  const int64_t n = N * C, e = dtype_bytes(t);
  const std::string size = fmt::format("{}x{}", N, C);
  auto buffer = [&](int64_t bytes, const char* what) { return dev.alloc(bytes, Account::kWorkspace, what); };
  Buffer x = buffer(n * e, "calibrate.x"), y = buffer(n * e, "calibrate.y"), z = buffer(n * e, "calibrate.z");
  Buffer w2 = buffer(n * e, "calibrate.w2"), wide = buffer(n * 4, "calibrate.fp32");
  Buffer w = buffer(C * e, "calibrate.w"), bias = buffer(C * e, "calibrate.bias");
  Buffer dw = buffer(C * e, "calibrate.dw"), dbias = buffer(C * e, "calibrate.dbias");
  Buffer mean = buffer(N * 4, "calibrate.mean"), rstd = buffer(N * 4, "calibrate.rstd");
  Buffer mask = buffer(n, "calibrate.mask");
  for (Buffer* b : {&x, &y, &z, &w2}) fill_values(dev, *b, t, n);
  fill_values(dev, wide, DType::kFP32, n);
  fill_values(dev, w, t, C);
  fill_values(dev, bias, t, C);
  dev.fill_zero(dw.data(), C * e);
  dev.fill_zero(dbias.data(), C * e);
  float* mu = mean.as<float>();
  float* rs = rstd.as<float>();

  dev.layernorm_forward(y.data(), mu, rs, x.data(), w.data(), bias.data(), t, N, C, kEps);
  time(OpClass::kNorm, "layernorm_forward", t, size, layernorm_forward_bytes(N, C, t),
       [&] { dev.layernorm_forward(y.data(), mu, rs, x.data(), w.data(), bias.data(), t, N, C, kEps); });
  time(OpClass::kNorm, "layernorm_backward", t, size, layernorm_backward_bytes(N, C, t, t), [&] {
    dev.layernorm_backward(z.data(), dw.data(), dbias.data(), t, y.data(), x.data(), w.data(), mu, rs, t, N, C, false);
  });
  time(OpClass::kNorm, "rmsnorm_forward", t, size, rmsnorm_forward_bytes(N, C, t),
       [&] { dev.rmsnorm_forward(y.data(), rs, x.data(), w.data(), t, N, C, kEps); });
  time(OpClass::kNorm, "rmsnorm_backward", t, size, rmsnorm_backward_bytes(N, C, t, t),
       [&] { dev.rmsnorm_backward(z.data(), dw.data(), t, y.data(), x.data(), w.data(), rs, t, N, C, false); });

  time(OpClass::kActivation, "gelu_forward", t, size, gelu_forward_bytes(n, t),
       [&] { dev.gelu_forward(y.data(), x.data(), t, n); });
  time(OpClass::kActivation, "gelu_backward", t, size, gelu_backward_bytes(n, t),
       [&] { dev.gelu_backward(z.data(), y.data(), x.data(), t, n); });
  time(OpClass::kActivation, "swiglu_forward", t, size, swiglu_forward_bytes(n, t),
       [&] { dev.swiglu_forward(z.data(), x.data(), y.data(), t, n); });
  time(OpClass::kActivation, "swiglu_backward", t, size, swiglu_backward_bytes(n, t),
       [&] { dev.swiglu_backward(z.data(), w2.data(), y.data(), x.data(), y.data(), t, n); });
  time(OpClass::kActivation, "dropout_forward", t, size, dropout_forward_bytes(n, t, true), [&] {
    dev.dropout_forward(y.data(), mask.as<uint8_t>(), x.data(), t, n, kDropout, RngKey{1234, 1});
  });
  time(OpClass::kActivation, "dropout_backward", t, size, dropout_backward_bytes(n, t, t),
       [&] { dev.dropout_backward(z.data(), t, y.data(), t, mask.as<uint8_t>(), n, kDropout); });
  time(OpClass::kActivation, "add", t, size, add_bytes(n, t), [&] { dev.add(z.data(), x.data(), y.data(), t, n); });
  time(OpClass::kActivation, "bias_add", t, size, bias_add_bytes(N, C, t),
       [&] { dev.bias_add(z.data(), w.data(), t, N, C); });
  time(OpClass::kActivation, "bias_backward", t, size, bias_backward_bytes(N, C, t, t, true),
       [&] { dev.bias_backward(dbias.data(), t, y.data(), t, N, C, true); });
  // RoPE over the rows as (1, heads, N, C / heads) with 32-wide heads.
  const int64_t heads = std::max<int64_t>(1, C / kHeadDim);
  time(OpClass::kActivation, "rope_forward", t, size, rope_bytes(1, heads, N, C / heads, t),
       [&] { dev.rope_forward(z.data(), t, 1, heads, N, C / heads, 0, 10000.0f); });
  time(OpClass::kActivation, "rope_backward", t, size, rope_bytes(1, heads, N, C / heads, t),
       [&] { dev.rope_backward(z.data(), t, 1, heads, N, C / heads, 0, 10000.0f); });
  time(OpClass::kActivation, "accumulate", t, size, accumulate_bytes(n, t, t),
       [&] { dev.accumulate(z.data(), t, x.data(), t, n); });
  time(OpClass::kActivation, "scale", t, size, scale_bytes(n, t), [&] { dev.scale(z.data(), t, 1.0f, n); });

  // AdamW as training runs it: fp32 weights updated in place, or 16-bit
  // weights written from an fp32 master; m and v fp32.
  const bool master = t != DType::kFP32;
  Buffer m = buffer(n * 4, "calibrate.m"), v = buffer(n * 4, "calibrate.v"), p = buffer(n * 4, "calibrate.master");
  dev.fill_zero(m.data(), n * 4);
  dev.fill_zero(v.data(), n * 4);
  fill_values(dev, p, DType::kFP32, n);
  OptimizerHyper h;
  h.kind = OptimizerKind::kAdamW;
  h.lr = 1e-3f;
  h.beta1 = 0.9f;
  h.beta2 = 0.95f;
  h.eps = 1e-8f;
  h.weight_decay = 0.1f;
  int64_t step = 0;
  time(OpClass::kOptimizer, "adamw", t, size, adamw_bytes(n, t, t, master), [&] {
    dev.optimizer_update(master ? p.as<float>() : nullptr, master ? x.data() : p.data(), t, y.data(), t, m.as<float>(),
                         v.as<float>(), n, h, ++step, 1.0f);
  });
  double sink = 0;
  time(OpClass::kOptimizer, "sum_squares", t, size, n * e, [&] { sink += dev.sum_squares(y.data(), t, n); });
  if (sink < 0) throw std::logic_error("calibrate: a sum of squares below 0");

  if (t != DType::kFP32) {
    time(OpClass::kCopy, "convert_from_fp32", t, size, convert_bytes(n, DType::kFP32, t),
         [&] { dev.convert(z.data(), t, wide.data(), DType::kFP32, n); });
    time(OpClass::kCopy, "convert_to_fp32", t, size, convert_bytes(n, t, DType::kFP32),
         [&] { dev.convert(wide.data(), DType::kFP32, x.data(), t, n); });
  }
  time_layout_copies(time, N, C, t, x, z);
}

// Cross-entropy over N rows of C fp32 logits (every column a real class).
void time_cross_entropy(Timer& time, int64_t N, int64_t C) {
  Device& dev = time.dev;
  const std::string size = fmt::format("{}x{}", N, C);
  Buffer logits = dev.alloc(N * C * 4, Account::kWorkspace, "calibrate.logits");
  Buffer dlogits = dev.alloc(N * C * 4, Account::kWorkspace, "calibrate.dlogits");
  Buffer losses = dev.alloc(N * 4, Account::kWorkspace, "calibrate.losses");
  fill_values(dev, logits, DType::kFP32, N * C);
  std::vector<int32_t> ids(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919) % C);
  Buffer targets = dev.alloc(N * 4, Account::kWorkspace, "calibrate.targets");
  dev.copy_from_host(targets.data(), ids.data(), N * 4);
  const auto* tg = targets.as<int32_t>();
  time(OpClass::kSoftmax, "cross_entropy_forward", DType::kFP32, size, cross_entropy_forward_bytes(N, C),
       [&] { dev.cross_entropy_forward(losses.as<float>(), logits.as<float>(), tg, N, C, C); });
  time(OpClass::kSoftmax, "cross_entropy_backward", DType::kFP32, size, cross_entropy_backward_bytes(N, C), [&] {
    dev.cross_entropy_backward(dlogits.as<float>(), logits.as<float>(), tg, N, C, C, 1.0f / static_cast<float>(N));
  });
}

// The materialized attention's softmax over one sample's causal T × T scores.
void time_softmax(Timer& time, int64_t heads, int64_t T, DType t) {
  Device& dev = time.dev;
  AttnShape s;
  s.B = 1;
  s.Hq = s.Hkv = heads;
  s.T = T;
  s.D = kSoftmaxHeadDim;
  const int64_t scores = heads * T * T;
  const std::string size = fmt::format("{}x{}x{}", heads, T, T);
  Buffer f32 = dev.alloc(scores * 4, Account::kWorkspace, "calibrate.scores");
  Buffer d32 = dev.alloc(scores * 4, Account::kWorkspace, "calibrate.dscores");
  Buffer probs = dev.alloc(scores * dtype_bytes(t), Account::kWorkspace, "calibrate.probs");
  fill_values(dev, f32, DType::kFP32, scores);
  fill_values(dev, d32, DType::kFP32, scores);
  time(OpClass::kSoftmax, "softmax_forward", t, size, softmax_forward_bytes(s, t),
       [&] { dev.softmax_forward(probs.data(), f32.as<float>(), t, s); });
  time(OpClass::kSoftmax, "softmax_backward", t, size, softmax_backward_bytes(s, t),
       [&] { dev.softmax_backward(f32.as<float>(), d32.as<float>(), probs.data(), t, s); });
}

std::string join_shapes(const OpClassCalibration& c) {
  std::string out;
  for (const auto& [N, C] : c.shapes) out += (out.empty() ? "" : ", ") + fmt::format("{}x{}", N, C);
  return out;
}

// What each class's figure was measured on, for its source.
std::string class_ops(OpClass cls, const OpClassCalibration& c) {
  const std::string rows = "at (rows x columns) " + join_shapes(c);
  switch (cls) {
    case OpClass::kNorm: return "layernorm and rmsnorm forward and backward " + rows;
    case OpClass::kActivation:
      return "gelu and swiglu forward and backward, dropout (p 0.1) forward and backward, add, bias add and "
             "backward, rope forward and backward (heads of 32), accumulate and scale over rows x columns elements " +
             rows;
    case OpClass::kSoftmax: {
      std::string seqs;
      for (int64_t T : c.softmax_seqs) seqs += (seqs.empty() ? "" : ", ") + std::to_string(T);
      return fmt::format(
          "softmax forward and backward over one sample's causal scores of {} heads at T = {}, and cross-entropy "
          "forward and backward (fp32 logits) {}",
          c.softmax_heads, seqs, rows);
    }
    case OpClass::kOptimizer:
      return "the adamw update (fp32 weights in place, or 16-bit weights from an fp32 master) and the sum of "
             "squares over rows x columns elements " +
             rows;
    case OpClass::kCopy:
      return "convert fp32 to and from the dtype (when 16-bit), Device::copy, merge_heads, split_heads, split_qkv and "
             "merge_qkv_grad (heads of 32) "
             "over "
             "rows x columns elements " +
             rows;
  }
  return "";
}

}  // namespace

OpClassCalibration quick_op_class_calibration() {
  OpClassCalibration c;
  c.shapes = {{64, 256}, {1024, 1024}};
  c.softmax_seqs = {128, 512};
  c.reps = 3;
  return c;
}

std::vector<OpTiming> time_op_classes(Device& dev, const OpClassCalibration& c, std::ostream& progress) {
  std::vector<OpTiming> out;
  Timer time{dev, c, progress, out};
  for (size_t i = 0; i < c.shapes.size(); ++i) {
    time.size_index = static_cast<int>(i);
    time_rows(time, c.shapes[i].first, c.shapes[i].second, c.dtype);
    time_cross_entropy(time, c.shapes[i].first, c.shapes[i].second);
  }
  for (size_t i = 0; i < c.softmax_seqs.size(); ++i) {
    time.size_index = static_cast<int>(i);
    time_softmax(time, c.softmax_heads, c.softmax_seqs[i], c.dtype);
  }
  return out;
}

double fit_class_bandwidth(const std::vector<OpTiming>& timings, OpClass op_class, double floor_seconds) {
  std::map<int, std::pair<double, double>> at_size;  // size index → (Σ bytes, Σ (t − floor))
  for (const auto& t : timings) {
    if (t.op_class != op_class) continue;
    auto& [bytes, seconds] = at_size[t.size_index];
    bytes += static_cast<double>(t.bytes);
    seconds += t.seconds - floor_seconds;
  }
  std::vector<double> rates;
  for (const auto& [i, sums] : at_size)
    if (sums.first > 0 && sums.second > 0) rates.push_back(sums.first / sums.second);
  return median(rates);
}

std::map<OpClass, perf::Sourced> op_class_bandwidths(const std::vector<OpTiming>& timings, const OpClassCalibration& c,
                                                     double floor_seconds, const std::string& device_description) {
  std::map<OpClass, perf::Sourced> out;
  for (OpClass cls : perf::kAllOpClasses) {
    const double beta = fit_class_bandwidth(timings, cls, floor_seconds);
    if (!(beta > 0))
      throw std::runtime_error(
          fmt::format("calibrate: no positive bandwidth fits the {} ops' times (launch floor {} s)",
                      perf::op_class_name(cls), floor_seconds));
    int64_t count = 0;
    for (const auto& t : timings) count += t.op_class == cls;
    out[cls] = {beta,
                fmt::format("measured by gpuledger calibrate: {} on the cpu backend ({}) in {}; median of {} after {} "
                            "warm-up; bytes as kernels/op_bytes.h counts them; at each size the bandwidth b for "
                            "which the ops' bytes / b + the launch floor ({:.3g} us) each sum to their measured "
                            "time, the median over the sizes ({} times)",
                            class_ops(cls, c), device_description, dtype_name(c.dtype), c.reps, c.warmup,
                            floor_seconds * 1e6, count)};
  }
  return out;
}

std::string_view op_cost_name(std::string_view timed) {
  if (timed == "adamw") return "optimizer_update";
  if (timed == "convert_from_fp32" || timed == "convert_to_fp32") return "convert";
  return timed;
}

std::map<std::string, perf::OpBandwidth, std::less<>> op_bandwidths(const std::vector<OpTiming>& timings,
                                                                    const OpClassCalibration& c, double floor_seconds,
                                                                    const std::string& device_description) {
  // (op, size index) → (Σ bytes, Σ (t − floor), timings)
  std::map<std::pair<std::string, int>, std::tuple<double, double, int>> sums;
  for (const auto& t : timings) {
    auto& [bytes, seconds, count] = sums[{std::string(op_cost_name(t.op)), t.size_index}];
    bytes += static_cast<double>(t.bytes);
    seconds += std::max(t.seconds - floor_seconds, t.seconds * 1e-3);  // a time at the floor still moves its bytes
    count += 1;
  }
  std::map<std::string, perf::OpBandwidth, std::less<>> out;
  for (const auto& [key, s] : sums) {
    const auto& [bytes, seconds, count] = s;
    out[key.first].points.emplace_back(static_cast<int64_t>(bytes / count), bytes / seconds);
  }
  for (auto& [name, b] : out) {
    std::sort(b.points.begin(), b.points.end());
    // Two sizes with the same bytes (not in the default lists) keep the first.
    b.points.erase(
        std::unique(b.points.begin(), b.points.end(), [](const auto& x, const auto& y) { return x.first == y.first; }),
        b.points.end());
    b.source = fmt::format(
        "measured by gpuledger calibrate: {} on the cpu backend ({}) in {}, median of {} after {} warm-up; at each "
        "size the bytes (kernels/op_bytes.h) over the time less the launch floor ({:.3g} us)",
        name, device_description, dtype_name(c.dtype), c.reps, c.warmup, floor_seconds * 1e6);
  }
  return out;
}

}  // namespace gpuledger::bench
