// kv_policy_error (models/transformer/kv_policy_error.h): a budgeted and a full
// cache fed the same tokens, their next-token logits compared past the budget.
#include "models/transformer/kv_policy_error.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "models/kv/kv_cache.h"

namespace gpuledger {

namespace {
constexpr int64_t kBlockTokens = 16;

int64_t argmax(const std::vector<float>& v) { return std::max_element(v.begin(), v.end()) - v.begin(); }
}  // namespace

KvPolicyErrorResult kv_policy_error(InferenceModel& model, const kv::KvGeometry& geometry,
                                    std::optional<int64_t> window, const KvEviction& eviction,
                                    const std::vector<std::vector<int32_t>>& sequences) {
  if (!eviction.evicts()) throw std::invalid_argument("kv_policy_error: the policy keeps every token");
  Device& dev = model.device();
  KvPolicyErrorResult r;
  double sq_err = 0, sq_ref = 0;
  int64_t agree = 0, values = 0;
  for (const auto& tokens : sequences) {
    const auto len = static_cast<int64_t>(tokens.size());
    if (len < 1) throw std::invalid_argument("kv_policy_error: an empty sequence");
    const int64_t blocks = (len + kBlockTokens - 1) / kBlockTokens + 1;  // + the null block
    kv::PagedKvCache budgeted(dev, geometry, blocks, kBlockTokens, window, eviction);
    kv::PagedKvCache full(dev, geometry, blocks, kBlockTokens, window);
    // The first chunk: up to the slot cap, as the engine's first step.
    const int64_t first = std::min(len, *budgeted.slot_cap());
    std::vector<int32_t> chunk(tokens.begin(), tokens.begin() + first);
    budgeted.add_sequence(0, first);
    full.add_sequence(0, first);
    std::vector<float> lb, lf;
    model.forward({{0, first}}, chunk, budgeted, &lb);
    model.forward({{0, first}}, chunk, full, &lf);
    for (int64_t p = first; p < len; ++p) {
      budgeted.append_tokens(0, 1);
      full.append_tokens(0, 1);
      const std::vector<int32_t> one{tokens[static_cast<size_t>(p)]};
      model.forward({{0, 1}}, one, budgeted, &lb);
      model.forward({{0, 1}}, one, full, &lf);
      // Position p + 1 is predicted from a cache that evicted once p >= budget.
      if (p < *budgeted.slot_cap()) continue;
      ++r.positions;
      for (size_t v = 0; v < lf.size(); ++v) {
        const double d = static_cast<double>(lb[v]) - lf[v];
        sq_err += d * d;
        sq_ref += static_cast<double>(lf[v]) * lf[v];
        r.max_error = std::max(r.max_error, std::fabs(d));
      }
      values += static_cast<int64_t>(lf.size());
      agree += argmax(lb) == argmax(lf) ? 1 : 0;
    }
    ++r.sequences;
  }
  if (values > 0) {
    r.rms_error = std::sqrt(sq_err / static_cast<double>(values));
    r.rms_reference = std::sqrt(sq_ref / static_cast<double>(values));
    r.top1_agreement = static_cast<double>(agree) / static_cast<double>(r.positions);
  }
  return r;
}

}  // namespace gpuledger
