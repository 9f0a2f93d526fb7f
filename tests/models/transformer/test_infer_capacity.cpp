// Capacity measured by filling the pool equals the analytic prediction
// (analytic/kv_cache.h kv_capacity) to the sequence, for several
// models, devices, contexts, cache layouts and KV dtypes — tolerance 0.
//
// The measured side is the serving setup (models/transformer/infer_setup.h):
// weights allocated by InferenceModel, the activation peak profiled from one
// prefill chunk on the ledger, the pool by vLLM's rule, the real cache
// classes, admission until it fails. The big models run on the meta backend
// (bookkeeping only). The analytic side gets the same device memory,
// utilization, measured weights and activation peak — the rule under test is
// how the pool turns into sequences (null block, fixed scales, window caps,
// whole reservations).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analytic/kv_cache.h"
#include "analytic/params.h"
#include "core/device_spec.h"
#include "models/kv/kv_format.h"
#include "models/transformer/infer_setup.h"
#include "tests/models/transformer/harness.h"

namespace gpuledger {
namespace {

struct Point {
  std::string model, device, layout;
  KvFormat format;
  KvScales scales;
  int64_t context, max_model_len, block;
};

analytic::KvOptions analytic_kv(const Point& p) {
  analytic::KvOptions o;
  o.layout = p.layout == "paged" ? KvLayout::kPaged : KvLayout::kContiguous;
  o.dtype = p.format == KvFormat::kBF16      ? KvFormat::kBF16
            : p.format == KvFormat::kFP8E4M3 ? KvFormat::kFP8E4M3
                                             : KvFormat::kInt8;
  o.scales = p.scales == KvScales::kPerTensor    ? KvScales::kPerTensor
             : p.scales == KvScales::kPerChannel ? KvScales::kPerChannel
                                                 : KvScales::kPerTokenHead;
  o.block = p.block;
  o.max_model_len = p.max_model_len;
  return o;
}

TEST(InferCapacity, MeasuredEqualsPredictedOnMeta) {
  const std::vector<Point> points = {
      {"llama3-8b", "h100-sxm", "paged", KvFormat::kBF16, KvScales::kPerTokenHead, 4096, 0, 16},
      {"llama3-8b", "h100-sxm", "paged", KvFormat::kFP8E4M3, KvScales::kPerTokenHead, 8192, 0, 16},
      {"llama3-8b", "h100-sxm", "contiguous", KvFormat::kBF16, KvScales::kPerTokenHead, 1000, 8192, 16},
      {"llama3-8b", "a100-80gb", "paged", KvFormat::kInt8, KvScales::kPerChannel, 2000, 0, 32},
      {"qwen2.5-7b", "h100-sxm", "paged", KvFormat::kBF16, KvScales::kPerTokenHead, 512, 0, 16},
      {"qwen2.5-7b", "h100-sxm", "paged", KvFormat::kFP8E4M3, KvScales::kPerTensor, 32768, 0, 16},
      {"qwen2.5-7b", "h200", "contiguous", KvFormat::kFP8E4M3, KvScales::kPerTokenHead, 4096, 32768, 16},
      {"mistral-7b", "h100-sxm", "paged", KvFormat::kBF16, KvScales::kPerTokenHead, 16384, 0, 16},  // window caps
  };
  const double util = 0.9;
  const int64_t chunk = 2048, overhead = 512 << 20;
  for (const Point& p : points) {
    SCOPED_TRACE(p.model + " " + p.device + " " + p.layout + " context " + std::to_string(p.context));
    const auto dev_spec = find_device(p.device);
    ASSERT_TRUE(dev_spec.has_value()) << p.device;
    testing::Env env("meta");
    const ModelConfig m = load_model(p.model);
    InferenceModel model(*env.dev, *env.tp, m, DType::kBF16, 1);
    Layout l;
    l.dp = l.tp = l.pp = 1;
    const kv::KvGeometry g = kv::kv_geometry(m, l, p.format, p.scales);
    const int64_t act = profile_activation_peak(model, g, chunk);
    EXPECT_GT(act, 0);
    const int64_t weights = model.weights().bytes();
    EXPECT_EQ(weights, analytic::rank_params(m, l, 0) * 2);
    const int64_t pool = serving_pool_bytes(dev_spec->memory_bytes, util, weights, act, overhead);
    auto cache = make_kv_cache(*env.dev, g, pool, CacheSpec{p.layout, p.block, p.max_model_len, m.sliding_window, {}});
    int64_t assigned_full = 0;
    const int64_t measured = fill_capacity(*cache, p.context, 1, &assigned_full);
    const auto predicted =
        analytic::kv_capacity(m, l, analytic_kv(p), dev_spec->memory_bytes, util, weights, act, overhead, p.context);
    EXPECT_EQ(predicted.pool_bytes, pool);
    EXPECT_EQ(measured, predicted.sequences);
    EXPECT_GT(measured, 0);
    // the bytes the full cache assigned == the analytic reservation for that many sequences
    EXPECT_EQ(assigned_full, analytic::kv_reserved_bytes(m, l, analytic_kv(p), measured, p.context));
    EXPECT_LE(cache->pool_bytes(), pool);
  }
}

// The same on the CPU backend with a real (tiny) model, a real profiling
// forward and a real pool: a 4 MiB "device".
TEST(InferCapacity, MeasuredEqualsPredictedOnCpu) {
  for (const char* layout : {"paged", "contiguous"})
    for (int64_t context : {7, 16, 33}) {
      testing::Env env("cpu");
      const ModelConfig m = load_model("tiny-llama");
      InferenceModel model(*env.dev, *env.tp, m, DType::kBF16, 1);
      Layout l;
      l.dp = l.tp = l.pp = 1;
      const kv::KvGeometry g = kv::kv_geometry(m, l, KvFormat::kInt8, KvScales::kPerTokenHead);
      const int64_t act = profile_activation_peak(model, g, 64);
      const int64_t weights = model.weights().bytes();
      const int64_t pool = serving_pool_bytes(4 << 20, 0.5, weights, act, 0);
      auto cache = make_kv_cache(*env.dev, g, pool, CacheSpec{layout, 8, 64, {}, {}});
      const int64_t measured = fill_capacity(*cache, context);
      Point p{"tiny-llama", "-", layout, KvFormat::kInt8, KvScales::kPerTokenHead, context, 64, 8};
      const auto predicted = analytic::kv_capacity(m, l, analytic_kv(p), 4 << 20, 0.5, weights, act, 0, context);
      EXPECT_EQ(measured, predicted.sequences) << layout << " " << context;
      EXPECT_GT(measured, 0);
    }
}

}  // namespace
}  // namespace gpuledger
