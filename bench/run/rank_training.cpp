// One rank's training run (see rank_training.h).
#include "bench/run/rank_training.h"

#include <algorithm>
#include <memory>

#include "bench/median.h"
#include "bench/report/ledger_json.h"
#include "kernels/profiling_device.h"

namespace gpuledger::bench {

using nlohmann::json;

RankRun run_rank_training(Device& device, const ResolvedConfig& r, const RankContext& ctx,
                          const CommCounters& counters, const RankRunOptions& o, json record) {
  RankRun run;
  Ledger& ledger = device.ledger();
  ledger.enable_timeline(o.timeline);
  int64_t executed_per_step = -1;
  bool flops_constant = true;
  std::unique_ptr<Trainer> trainer;
  auto fail = [&](const char* status, const std::string& what) {
    run.status = status;
    run.error = what;
  };
  try {
    trainer = std::make_unique<Trainer>(device, r.model, r.run, ctx);
  } catch (const OutOfMemory& e) {
    fail("oom", e.what());
  } catch (const std::exception& e) {
    fail("error", e.what());
  }
  if (o.agree_after_setup) {
    const std::string other = o.agree_after_setup(run.status == "ok", run.error);
    if (!other.empty() && run.status == "ok") fail("error", "not run: " + other);
  }
  if (run.status != "ok") trainer.reset();
  try {
    for (int64_t step = 0; trainer && step < o.steps; ++step) {
      const StepResult s = trainer->step(step);
      run.losses.push_back(s.loss);
      run.step_ms.push_back(s.seconds * 1e3);
      run.compute_ms.push_back(s.compute_seconds * 1e3);
      run.comm_ms.push_back(s.comm_seconds * 1e3);
      if (executed_per_step >= 0 && executed_per_step != s.executed_flops) flops_constant = false;
      executed_per_step = s.executed_flops;
      if (o.on_step) o.on_step(step, s, ledger);
      // Op times count the timed steps only, like the medians.
      if (step + 1 == o.warmup && o.warmup < o.steps)
        if (auto* prof = dynamic_cast<ProfilingDevice*>(&device)) prof->reset_op_times();
    }
  } catch (const OutOfMemory& e) {
    fail("oom", e.what());
    run.failed_in_step = true;
  } catch (const std::exception& e) {
    fail("error", e.what());
    run.failed_in_step = true;
  }
  trainer.reset();
  record["measured"] = report::ledger_json(ledger, o.timeline);
  record["comm"] = report::comm_json(counters);
  // Medians leave the warm-up steps out (unless nothing else ran).
  auto timed = [&](const std::vector<double>& v) {
    const size_t first = std::min<size_t>(static_cast<size_t>(std::max<int64_t>(o.warmup, 0)), v.size());
    std::vector<double> t(v.begin() + static_cast<std::ptrdiff_t>(first), v.end());
    return t.empty() ? v : t;
  };
  record["time"] = {{"step_ms", run.step_ms},
                    {"median_step_ms", median(timed(run.step_ms))},
                    {"median_compute_ms", median(timed(run.compute_ms))},
                    {"median_comm_ms", median(timed(run.comm_ms))}};
  if (executed_per_step >= 0) record["flops"]["executed_per_step"] = executed_per_step;
  record["flops"]["executed_same_every_step"] = flops_constant;
  if (auto* prof = dynamic_cast<ProfilingDevice*>(&device)) {
    json ops = json::object();
    double total = 0;
    for (const auto& [name, t] : prof->op_times()) total += t.seconds;
    for (const auto& [name, t] : prof->op_times())
      ops[name] = {{"calls", t.calls}, {"seconds", t.seconds}, {"flops", t.flops},
                   {"share", total > 0 ? t.seconds / total : 0.0},
                   {"flops_per_s", t.seconds > 0 ? t.flops / t.seconds : 0.0}};
    record["op_time"] = ops;
  }
  record["status"] = run.status;
  if (run.status != "ok") record["error"] = run.error;
  run.record = std::move(record);
  return run;
}

}  // namespace gpuledger::bench
