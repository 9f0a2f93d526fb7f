// Test helper (not a test binary): one rank's Params and StageModel of a
// layout, on a chosen backend, with its simulated groups (make_sim_groups:
// SimComm books what a real comm of that group would) — what a single part of
// the training step (parallel/dp, parallel/zero, parallel/pp,
// parallel/finalize_grads.h) needs to run alone.
#pragma once
#include <memory>
#include <string>

#include "comm/comm.h"
#include "core/model_config.h"
#include "core/run_config.h"
#include "kernels/device.h"
#include "kernels/ledger.h"
#include "kernels/registry/registry.h"
#include "models/transformer/model.h"
#include "models/transformer/params.h"
#include "parallel/groups.h"

namespace gpuledger::testing {

struct PartRig {
  Ledger ledger;
  std::unique_ptr<Device> dev;
  CommCounters counters;
  Groups groups;
  RankContext ctx;
  std::unique_ptr<Params> params;
  std::unique_ptr<StageModel> stage;

  // shard_grads / shard_weights: Params sharded over dp (ZeRO 2 / 3).
  PartRig(const std::string& backend, const ModelConfig& m, const RunConfig& r, const Layout& l, int64_t rank,
          bool shard_grads = false, bool shard_weights = false)
      : dev(make_device(backend, ledger)) {
    groups = make_sim_groups(l, rank, counters, *dev, m.tied_embeddings);
    ctx = groups.context();
    const DType g = r.dtype == DType::kFP32 ? DType::kFP32 : r.grad_dtype;
    params = std::make_unique<Params>(*dev, make_param_layout(m, l, ctx.coords), r.dtype, g,
                                      ParamSharding{shard_grads, shard_weights, ctx.shard_groups()});
    params->initialise(r.seed, m.layers);
    stage = std::make_unique<StageModel>(*dev, *ctx.tp, m, r, l, ctx.coords, *params);
  }

  CommCount count(const std::string& key) const {
    auto it = counters.by_key().find(key);
    return it == counters.by_key().end() ? CommCount{} : it->second;
  }
};

inline RunConfig small_run() {
  RunConfig r;
  r.seq = 16;
  r.mbs = 2;
  r.microbatches = 2;
  r.dtype = DType::kFP32;
  return r;
}

inline Layout layout_of(int64_t dp, int64_t tp, int64_t pp, bool sp = false, int zero = 0) {
  Layout l;
  l.dp = dp;
  l.tp = tp;
  l.pp = pp;
  l.sp = sp;
  l.zero = zero;
  return l;
}

}  // namespace gpuledger::testing
