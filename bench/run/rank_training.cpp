// One rank's training run (see rank_training.h).
#include "bench/run/rank_training.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>

#include "bench/median.h"
#include "core/device_spec.h"
#include "models/io/hf_weights.h"

namespace gpuledger::bench {

RankRun run_rank_training(Device& device, const ResolvedConfig& r, const RankContext& ctx, CommCounters& counters,
                          const RankRunOptions& o, run::PlanRankRecord analytic) {
  RankRun run;
  TrainRankRecord& rec = run.record;
  rec.analytic = std::move(analytic);
  std::vector<double> compute_ms, comm_ms;
  Ledger& ledger = device.ledger();
  ledger.enable_timeline(o.timeline);
  ledger.enable_events(true);  // replayed through PyTorch's caching allocator for the report
  int64_t executed_per_step = -1;
  bool flops_constant = true;
  // --trace: the ops (through the profiling device) and the collectives of
  // every step, the trainer's set-up included.
  TraceRecorder trace;
  auto* profiled = dynamic_cast<ProfilingDevice*>(&device);
  if (o.trace) {
    if (!profiled) throw std::logic_error("run_rank_training: a trace needs the profiling device");
    profiled->set_trace(&trace);
    counters.set_trace(&trace);
  }
  std::unique_ptr<Trainer> trainer;
  auto fail = [&](const char* status, const std::string& what) {
    rec.status = status;
    rec.error = what;
  };
  try {
    trainer = std::make_unique<Trainer>(device, r.model, r.run, ctx);
  } catch (const OutOfMemory& e) {
    fail("oom", e.what());
  } catch (const std::exception& e) {
    fail("error", e.what());
  }
  if (o.agree_after_setup) {
    const std::string other = o.agree_after_setup(rec.status == "ok", rec.error);
    if (!other.empty() && rec.status == "ok") fail("error", "not run: " + other);
  }
  if (rec.status != "ok") trainer.reset();
  try {
    for (int64_t step = 0; trainer && step < o.steps; ++step) {
      const StepResult s = trainer->step(step);
      run.losses.push_back(s.loss);
      rec.step_ms.push_back(s.seconds * 1e3);
      rec.step_peak_bytes.push_back(ledger.peak_total());
      if (r.model.is_moe()) rec.moe_dropped_choices.push_back(s.moe_dropped_choices);
      compute_ms.push_back(s.compute_seconds * 1e3);
      comm_ms.push_back(s.comm_seconds * 1e3);
      if (executed_per_step >= 0 && executed_per_step != s.executed_flops) flops_constant = false;
      executed_per_step = s.executed_flops;
      if (o.on_step) o.on_step(step, s, ledger);
      // A non-finite loss (NaN or inf) is a failed run, not a result: every
      // rank holds the same all-reduced loss, so every rank stops here.
      if (!std::isfinite(s.loss))
        throw std::runtime_error("the loss became non-finite (" + std::to_string(s.loss) + ") at step " +
                                 std::to_string(step));
      // Op times count the timed steps only, like the medians.
      if (step + 1 == o.warmup && o.warmup < o.steps)
        if (profiled) profiled->reset_op_times();
    }
  } catch (const OutOfMemory& e) {
    fail("oom", e.what());
    run.failed_in_step = true;
  } catch (const std::exception& e) {
    fail("error", e.what());
    run.failed_in_step = true;
  }
  try {
    if (trainer && rec.status == "ok" && !o.save_weights.empty() && ctx.rank == 0)
      save_hf_checkpoint(o.save_weights, r.model, trainer->parameters_fp32());
  } catch (const std::exception& e) {
    fail("error", std::string("--save-weights: ") + e.what());
  }
  trainer.reset();
  if (o.trace) {
    profiled->set_trace(nullptr);
    counters.set_trace(nullptr);
    rec.trace = trace.slices();
    rec.trace_dropped = trace.dropped();
  }
  // PyTorch's cuBLAS workspace for the device's architecture (a non-Hopper one when no preset is named).
  rec.measured =
      ledger_record(ledger, o.timeline, torch_cublas_workspace_bytes(r.device ? device_sm_major(*r.device) : 8));
  rec.comm = counters.by_key();
  // Medians leave the warm-up steps out (unless nothing else ran).
  auto timed = [&](const std::vector<double>& v) {
    const size_t first = std::min<size_t>(static_cast<size_t>(std::max<int64_t>(o.warmup, 0)), v.size());
    std::vector<double> t(v.begin() + static_cast<std::ptrdiff_t>(first), v.end());
    return t.empty() ? v : t;
  };
  rec.median_step_ms = median(timed(rec.step_ms));
  rec.median_compute_ms = median(timed(compute_ms));
  rec.median_comm_ms = median(timed(comm_ms));
  if (executed_per_step >= 0) rec.executed_flops_per_step = executed_per_step;
  rec.executed_same_every_step = flops_constant;
  if (profiled) rec.op_time = profiled->op_times();
  return run;
}

}  // namespace gpuledger::bench
