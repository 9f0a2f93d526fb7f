// The cost of a KV budget: what evicting tokens (window, sink, h2o) does to a
// model's outputs, against a cache that keeps every token, on the same
// sequences.
//
// Both caches are fed the same tokens (teacher forcing: each sequence's prompt
// and the tokens the budgeted run generated), in the same steps — the first
// min(length, budget) tokens as one chunk, then one token per step — through
// the same model, so the only difference is which keys each query sees. At
// every position past the budget (where the budgeted cache has evicted) the
// next-token logits of the two are compared: RMS and largest difference, the
// RMS of the full-cache logits (the error's scale), and how often the argmax
// (the greedy token) agrees. At positions within the budget nothing was
// evicted: those logits agree to the bit (a test holds them to 0).
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "core/kv_types.h"
#include "models/kv/kv_format.h"
#include "models/transformer/infer_model.h"

namespace gpuledger {

struct KvPolicyErrorResult {
  int64_t sequences = 0;
  int64_t positions = 0;  // compared: positions past the budget
  double rms_error = 0, max_error = 0;
  double rms_reference = 0;     // RMS of the full-cache logits there
  double top1_agreement = 1.0;  // fraction of those positions whose argmax agrees (1 when none)
};

// `sequences`: token ids (each >= 1 token); `window`: the model's sliding
// window, if any. Allocates two paged caches of one sequence on the model's
// device (freed before it returns).
KvPolicyErrorResult kv_policy_error(InferenceModel& model, const kv::KvGeometry& geometry,
                                    std::optional<int64_t> window, const KvEviction& eviction,
                                    const std::vector<std::vector<int32_t>>& sequences);

}  // namespace gpuledger
