// One rank of an MPI training job (see train_run.h).
#include "bench/run/train_run.h"

#if GPULEDGER_HAVE_MPI
#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <iostream>
#include <set>

#include "analytic/flops.h"
#include "bench/exit_codes.h"
#include "bench/host_cpu.h"
#include "bench/peak.h"
#include "bench/report/trace_json.h"
#include "bench/report/train_json.h"
#include "bench/report/train_progress.h"
#include "bench/run/plan_run.h"
#include "comm/mpi_check.h"
#include "comm/mpi_runtime.h"
#include "parallel/groups.h"

namespace gpuledger::run::detail {

namespace {

// Rank 0 measures the peak (the others wait in the broadcast), then shares it.
TrainPeak shared_peak(const TrainRequest& q, int64_t rank) {
  TrainPeak peak;
  if (rank == 0) peak = resolve_train_peak(q);
  double value = peak.flops.value_or(-1.0);
  MPI_CHECK(MPI_Bcast(&value, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD), "sharing the measured peak");
  if (rank != 0) peak.flops = value > 0 ? std::optional<double>(value) : std::nullopt;
  return peak;
}

// Every rank's record on rank 0 (the others' records stay empty), sent as the
// report writes it; with `trace` (the same on every rank) its trace slices too.
std::vector<bench::RankRun> gather_runs(const bench::RankRun& mine, bool trace) {
  const auto records = gather_strings(report::train_rank_json(mine.record).dump());
  const auto losses = gather_strings(nlohmann::json(mine.losses).dump());
  std::vector<std::string> traces;
  if (trace)
    traces = gather_strings(
        nlohmann::json::array({report::trace_slices_json(mine.record.trace), mine.record.trace_dropped}).dump());
  std::vector<bench::RankRun> runs;
  for (size_t i = 0; i < records.size(); ++i) {
    bench::RankRun rr;
    rr.record = report::train_rank_from_json(nlohmann::json::parse(records[i]));
    rr.losses = nlohmann::json::parse(losses[i]).get<std::vector<double>>();
    if (trace) {
      const auto t = nlohmann::json::parse(traces[i]);
      rr.record.trace = report::trace_slices_from_json(t[0]);
      rr.record.trace_dropped = t[1].get<int64_t>();
    }
    runs.push_back(std::move(rr));
  }
  return runs;
}

// Ranks that fail inside a step cannot agree (their peers wait in a
// collective), yet only one may write the report: the first to create
// PATH.failed-rank (O_EXCL: one creator) writes it, and the marker names it.
// Rank 0 removes a marker left by an earlier run before the first collective.
std::string failed_rank_marker(const std::string& report_path) {
  return report_path.empty() || report_path == "-" ? std::string() : report_path + ".failed-rank";
}

bool first_to_fail(const std::string& report_path, int64_t rank) {
  const std::string marker = failed_rank_marker(report_path);
  if (marker.empty()) return true;
  const int fd = open(marker.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return errno != EEXIST;  // another rank was first; any other error: write anyway
  const std::string text = std::to_string(rank) + "\n";
  (void)!write(fd, text.data(), text.size());
  close(fd);
  return true;
}

// cpu: beside the measured sgemm, the hardware's own — every host's CPUs the
// ranks may run on (a collective; rank 0 keeps the figure).
void gather_hardware_peak(const TrainRequest& q, MpiRuntime& mpi, int64_t rank, TrainRecord& rec) {
  if (q.backend != "cpu") return;
  const auto affinities = gather_strings(bench::affinity_record(mpi.hostname()));
  if (rank != 0) return;
  const auto hw = bench::job_hardware_peak(bench::cpus_per_host(affinities), q.config.run.dtype);
  if (hw.flops_per_s > 0) rec.hardware_peak_flops = hw.flops_per_s;
  rec.hardware_peak_source = hw.source;
  rec.hardware_peak_cpu = hw.cpu;
}

}  // namespace

TrainRecord run_train_mpi_rank(const TrainRequest& q, const TrainProgress& progress) {
  MpiRuntime mpi;
  const auto& c = q.config;
  const auto& l = c.layout;
  const int64_t rank = mpi.world_rank();
  // Before the peak measurement, which takes seconds: a world that does not
  // match the layout is refused at once.
  require_mpi_world(mpi.world_size(), l);
  TrainRecord rec;
  rec.request = q;
  Ledger ledger(q.memory_limit_bytes);
  // The GPU by the rank's place on its node, not its world rank (core/local_rank.h).
  auto dev = make_train_device(q, ledger, static_cast<int>(mpi.local_rank()));
  rec.device_description = dev->description();
  if (rank == 0 && !failed_rank_marker(progress.report_path).empty()) {
    std::error_code ignored;
    std::filesystem::remove(failed_rank_marker(progress.report_path), ignored);
  }
  rec.peak = shared_peak(q, rank);  // a collective: no rank fails in a step before the stale marker is gone
  rec.hosts = gather_strings(mpi.hostname());
  int64_t nodes = std::set<std::string>(rec.hosts.begin(), rec.hosts.end()).size();
  MPI_CHECK(MPI_Bcast(&nodes, 1, MPI_INT64_T, 0, MPI_COMM_WORLD), "sharing the node count");
  // Devices whose peaks add up: every rank. On a GPU, its device; on the CPU,
  // the cores it is bound to (OpenMP's pool is the rank's affinity mask,
  // kernels/cpu/thread_policy.h), and rank 0 measured the sgemm on its own: a
  // node of r ranks bound to a core each peaks at r times that. (Unbound ranks
  // sharing all cores would overstate it, never understate: MFU errs low.)
  rec.peak_devices = l.world();
  gather_hardware_peak(q, mpi, rank, rec);  // a collective on the CPU

  CommCounters counters;
  std::optional<Groups> groups;
  std::string setup_error;
  try {
    groups.emplace(make_mpi_groups(l, counters, *dev, c.model.tied_embeddings, comm_backend_for(q.backend)));
  } catch (const std::exception& e) {
    setup_error = e.what();
  }
  const auto agreed = agree_status(setup_error.empty(), setup_error);
  if (!agreed.all_ok) {
    if (rank == 0)
      std::cerr << "gpuledger train: error on rank " << agreed.first_failed_rank << ": " << agreed.error << "\n";
    rec.exit_without_report = cli::kExitUsage;
    return rec;
  }

  rec.mode = fmt::format("MPI, {} ranks on {} node(s)", l.world(), nodes);
  std::ostream* os = rank == 0 ? progress.os : nullptr;
  if (os)
    report::print_train_header(*os, c,
                               {q.backend, rec.device_description, rec.mode, q.steps, q.warmup, q.memory_limit_bytes,
                                rec.peak.flops, rec.peak.source});
  const auto job = analytic::job_step_flops(c.model, l, c.run);
  std::optional<double> peak_total;
  if (rec.peak.flops) peak_total = *rec.peak.flops * rec.peak_devices;
  bench::RankRunOptions ro;
  ro.steps = q.steps;
  ro.warmup = q.warmup;
  ro.timeline = q.timeline;
  ro.trace = q.trace;
  ro.save_weights = q.save_weights;
  ro.agree_after_setup = [](bool ok, const std::string& error) {
    const auto a = agree_status(ok, error);
    return a.all_ok ? std::string() : fmt::format("rank {} failed: {}", a.first_failed_rank, a.error);
  };
  if (os)
    ro.on_step = [&](int64_t step, const StepResult& s, const Ledger& lg) {
      report::print_train_step(*os, {step, s.loss, s.seconds, c.run.tokens_per_step(l.dp), job.model, job.hardware,
                                     peak_total, lg.peak_total()});
    };
  bench::RankRun run =
      bench::run_rank_training(*dev, c, groups->context(), counters, ro, plan_rank(c, rank, q.memory_limit_bytes));
  if (run.failed_in_step && l.world() > 1) {
    // Failed inside a step: peers may be waiting in a collective this rank will
    // never enter. Write what this rank knows and end the job (no hang).
    rec.runs = {run};
    std::cerr << fmt::format(
        "gpuledger train: rank {} failed during step {}: {} — aborting all ranks "
        "(its report: {})\n",
        rank, run.losses.size(), run.record.error,
        progress.report_path.empty() ? "not requested" : progress.report_path);
    if (progress.write_before_abort && first_to_fail(progress.report_path, rank)) progress.write_before_abort(rec);
    MPI_Abort(MPI_COMM_WORLD, cli::kExitFailed);
  }
  // Everyone reached here: failures (if any) happened before the first collective
  // of a step on every rank that failed; gather every record on rank 0.
  auto runs = gather_runs(run, q.trace);
  const bool all_ok = agree_status(run.record.status == "ok", run.record.error).all_ok;
  if (rank != 0) {
    rec.exit_without_report = all_ok ? cli::kExitOk : cli::kExitFailed;
    return rec;
  }
  rec.runs = std::move(runs);
  refresh_exceeded_peak(rec);  // the other ranks have finished: rank 0 has the node's cores
  return rec;
}

}  // namespace gpuledger::run::detail
#endif
