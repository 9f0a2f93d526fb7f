// Test helper (not a test binary): a one-rank Trainer on a chosen backend,
// with every group a one-rank Comm (comm/comm.h make_self_comm).
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "comm/comm.h"
#include "core/model_config.h"
#include "core/run_config.h"
#include "kernels/device.h"
#include "kernels/ledger.h"
#include "kernels/registry/registry.h"
#include "parallel/context/rank_context.h"
#include "parallel/train_step.h"

namespace gpuledger::testing {

struct TrainerRig {
  Ledger ledger;
  std::unique_ptr<Device> dev;
  CommCounters counters;
  std::unique_ptr<Comm> tp, dp, pp;
  std::unique_ptr<Trainer> trainer;

  using MakeDevice = std::function<std::unique_ptr<Device>(Ledger&)>;

  TrainerRig(const std::string& backend, const ModelConfig& m, const RunConfig& r,
             std::optional<int64_t> limit_bytes = std::nullopt)
      : TrainerRig([&backend](Ledger& l) { return make_device(backend, l); }, m, r, limit_bytes) {}

  // Any device, e.g. a backend under test that make_device does not know (tests/gpu).
  TrainerRig(const MakeDevice& make, const ModelConfig& m, const RunConfig& r,
             std::optional<int64_t> limit_bytes = std::nullopt)
      : ledger(limit_bytes),
        dev(make(ledger)),
        tp(make_self_comm("tp", counters, *dev)),
        dp(make_self_comm("dp", counters, *dev)),
        pp(make_self_comm("pp", counters, *dev)) {
    RankContext ctx;
    ctx.layout = Layout{};
    ctx.rank = 0;
    ctx.coords = Coords{};
    ctx.tp = tp.get();
    ctx.dp = dp.get();
    ctx.pp = pp.get();
    ctx.counters = &counters;
    trainer = std::make_unique<Trainer>(*dev, m, r, ctx);
  }
};

}  // namespace gpuledger::testing
