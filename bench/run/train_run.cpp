// Training runs in this process: one rank, or simulated ranks of a meta world
// (see train_run.h).
#include "bench/run/train_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "analytic/flops.h"
#include "bench/peak.h"
#include "bench/report/train_progress.h"
#include "bench/run/launcher.h"
#include "bench/run/plan_run.h"
#include "bench/run/predict_step.h"
#include "kernels/profiling_device.h"
#include "kernels/registry/registry.h"
#include "parallel/groups.h"

namespace gpuledger::run {

namespace detail {

// The rank's device, wrapped to time every op under --profile.
std::unique_ptr<Device> make_train_device(const TrainRequest& q, Ledger& ledger, int local_rank) {
  auto dev = make_device(q.backend, ledger, local_rank);
  if (q.profile) return std::make_unique<ProfilingDevice>(std::move(dev));
  return dev;
}

// The peak MFU is taken against: --peak-flops, the device's datasheet, or (cpu)
// an sgemm measured by this run at its start, on a device of its own so that the
// run's ledger and FLOP counter never see it.
TrainPeak resolve_train_peak(const TrainRequest& q) {
  if (q.peak_flops) return {*q.peak_flops, "--peak-flops"};
  if (const auto& d = q.config.device) {
    auto p = device_peak_flops(*d, q.config.run.dtype, q.config.run.fp8);
    if (p) return {p, d->name + " datasheet (" + device_peak_source(*d, q.config.run.fp8) + ")"};
  }
  if (q.backend == "cpu" && q.cpu_peak_flops) return {*q.cpu_peak_flops, q.cpu_peak_source};
  if (q.backend == "cpu") {
    const auto p = bench::measure_cpu_session_peak(q.config.run.dtype);
    return {p.flops_per_s, p.source, /*measured_now=*/true};
  }
  return {std::nullopt, "unknown: no datasheet peak for this device (pass --peak-flops or --device)"};
}

void refresh_exceeded_peak(TrainRecord& rec) {
  if (!rec.peak.measured_now || !rec.peak.flops) return;
  double step_ms = 0;  // the slowest reported rank's median, as the report's step time
  for (const auto& r : rec.runs) step_ms = std::max(step_ms, r.record.median_step_ms);
  if (step_ms <= 0) return;
  const auto& q = rec.request;
  // Executed FLOPs (recompute included) ≥ model FLOPs: the HFU bound is the tighter one.
  const double job_rate =
      static_cast<double>(analytic::job_step_flops(q.config.model, q.config.layout, q.config.run).hardware) /
      (step_ms / 1e3);
  const auto refreshed =
      bench::refresh_session_peak(job_rate / static_cast<double>(rec.peak_devices), *rec.peak.flops, rec.peak.source);
  rec.peak.flops = refreshed.flops_per_s;
  rec.peak.source = refreshed.source;
  // The hardware figure is never below the sgemm measured on the same CPUs.
  bench::raise_to_measured(rec.hardware_peak_flops, rec.hardware_peak_source,
                           *rec.peak.flops * static_cast<double>(rec.peak_devices), "the sgemm this run measured");
}

TrainRecord run_train_in_process(const TrainRequest& q, const TrainProgress& progress, bool simulate) {
  const auto& c = q.config;
  const auto& l = c.layout;
  const std::vector<int64_t> ranks = simulate ? q.simulated_ranks : std::vector<int64_t>{0};
  TrainRecord rec;
  rec.request = q;
  Ledger probe_ledger;
  rec.device_description = make_device(q.backend, probe_ledger)->description();
  rec.peak = resolve_train_peak(q);
  if (q.backend == "cpu") {  // beside the measured sgemm, the hardware's own
    const auto hw = bench::host_hardware_peak(q.config.run.dtype);
    if (hw.flops_per_s > 0) rec.hardware_peak_flops = hw.flops_per_s;
    rec.hardware_peak_source = hw.source;
    rec.hardware_peak_cpu = hw.cpu;
  }
  // One process: one CPU node, or the one simulated device's peak × the world.
  rec.peak_devices = simulate ? l.world() : 1;
  rec.mode = simulate ? fmt::format("meta simulation of {} of {} ranks", ranks.size(), l.world()) : "one rank";
  if (progress.os)
    report::print_train_header(*progress.os, c,
                               {q.backend, rec.device_description, rec.mode, q.steps, q.warmup, q.memory_limit_bytes,
                                rec.peak.flops, rec.peak.source});
  const auto job = analytic::job_step_flops(c.model, l, c.run);
  std::optional<double> peak_total;  // meta runs no op: its step times are bookkeeping, no MFU is printed
  if (rec.peak.flops && q.backend != "meta") peak_total = *rec.peak.flops * rec.peak_devices;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const int64_t rank = ranks[i];
    Ledger ledger(q.memory_limit_bytes);
    auto dev = make_train_device(q, ledger, 0);
    CommCounters counters;
    Groups groups = simulate ? make_sim_groups(l, rank, counters, *dev, c.model.tied_embeddings)
                             : make_single_groups(counters, *dev);
    bench::RankRunOptions ro;
    ro.steps = q.steps;
    ro.warmup = q.warmup;
    ro.timeline = q.timeline;
    ro.trace = q.trace;
    ro.save_weights = q.save_weights;
    if (i == 0 && progress.os)
      ro.on_step = [&](int64_t step, const StepResult& s, const Ledger& lg) {
        report::print_train_step(*progress.os, {step, s.loss, s.seconds, c.run.tokens_per_step(l.dp), job.model,
                                                job.hardware, peak_total, lg.peak_total()});
      };
    // make_single_groups knows no layout (Layout{}): the rank runs the run's own
    // (world 1), so that its ZeRO stage and what depends on it (--offload) hold.
    RankContext ctx = groups.context();
    ctx.layout = l;
    ctx.coords = l.coords(rank);
    rec.runs.push_back(bench::run_rank_training(*dev, c, ctx, counters, ro, plan_rank(c, rank, q.memory_limit_bytes)));
  }
  refresh_exceeded_peak(rec);
  return rec;
}

}  // namespace detail

namespace {

TrainRecord run_train_ranks(const TrainRequest& q, const TrainProgress& progress) {
  const Layout& l = q.config.layout;
  if (q.backend == "meta" && l.world() > 1) return detail::run_train_in_process(q, progress, /*simulate=*/true);
  if (l.world() > 1 || launched_by_mpi_launcher()) {
#if GPULEDGER_HAVE_MPI
    return detail::run_train_mpi_rank(q, progress);
#else
    throw LayoutError(
        fmt::format("a layout of {} ranks needs MPI, and this binary was built without it "
                    "(-DGPULEDGER_MPI=OFF); use --backend meta to simulate it",
                    l.world()));
#endif
  }
  return detail::run_train_in_process(q, progress, /*simulate=*/false);
}

}  // namespace

// The runs, then (on the rank that reports) the predicted step on the
// profiles — of a run that completed: a layout that does not fit has no step to time.
TrainRecord run_train(const TrainRequest& q, const TrainProgress& progress) {
  TrainRecord rec = run_train_ranks(q, progress);
  const bool completed =
      std::all_of(rec.runs.begin(), rec.runs.end(), [](const bench::RankRun& r) { return r.record.status == "ok"; });
  if (q.profiles && !rec.exit_without_report && completed)
    rec.prediction = predict_step(q.config, *q.profiles, q.predicted_trace);
  return rec;
}

}  // namespace gpuledger::run
