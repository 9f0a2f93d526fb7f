// Serving on one rank (see infer_run.h).
#include "bench/run/infer_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "bench/exit_codes.h"
#include "bench/peak.h"
#include "bench/report/checks.h"
#include "bench/report/infer_json.h"
#include "bench/run/infer_serve.h"
#include "bench/run/launcher.h"
#include "bench/stream_read.h"
#include "comm/comm.h"
#include "kernels/registry/registry.h"
#include "parallel/groups.h"
#if GPULEDGER_HAVE_MPI
#include "comm/mpi_check.h"
#include "comm/mpi_runtime.h"
#endif

namespace gpuledger {
class MpiRuntime;  // comm/mpi_runtime.h (built only with MPI)
}

namespace gpuledger::run {

using nlohmann::json;

namespace {

// On the CPU both peaks are measured by this run at its start, on a device of their
// own; elsewhere they come from the device's datasheet.
InferPeaks resolve_peaks(const InferRequest& q) {
  InferPeaks p;
  const auto& device = q.config.device;
  if (q.backend == "cpu") {
    // A decode step reads (weights, K/V): the read STREAM, on arrays past the LLC.
    const auto bw = bench::measure_read_bandwidth(1, 5);
    p.bandwidth = bw.bytes_per_s;
    p.bandwidth_source = "measured now: " + bw.kernel();
    const auto peak = bench::measure_cpu_session_peak(q.config.run.dtype);
    p.flops = peak.flops_per_s;
    p.flops_source = peak.source;
    const auto hw = bench::host_hardware_peak(q.config.run.dtype);
    if (hw.flops_per_s > 0) p.hardware_flops = hw.flops_per_s;
    p.hardware_source = hw.source;
    p.hardware_cpu = hw.cpu;
    bench::raise_to_measured(p.hardware_flops, p.hardware_source, peak.flops_per_s, "the GEMM measured now");
  } else if (device) {
    p.bandwidth = device->bandwidth_bytes_per_s;
    p.bandwidth_source = device->name + " datasheet (" + device->source + ")";
    p.flops = device_peak_flops(*device, q.config.run.dtype);
    p.flops_source = p.bandwidth_source;
  } else {
    p.bandwidth_source = p.flops_source = "unknown (no --device)";
  }
  if (q.peak_flops) {
    p.flops = *q.peak_flops;
    p.flops_source = "--peak-flops";
  }
  return p;
}

#if GPULEDGER_HAVE_MPI
// Rank 0 gathers every rank's record, checks and status; the serving figures
// are rank 0's own.
InferRecord gather_on_rank0(InferRecord rec, const InferRankRecord& mine, int64_t rank_id) {
  const json sent = {
      {"record", report::infer_rank_json(mine)}, {"checks", rec.checks}, {"status", rec.status}, {"error", rec.error}};
  const auto all = gather_strings(sent.dump());
  const bool ok = rec.status == "ok" && bench::all_ok(rec.checks);
  if (rank_id != 0) {
    InferRecord quiet;
    quiet.exit_without_report = ok ? cli::kExitOk : cli::kExitFailed;
    return quiet;
  }
  rec.ranks.clear();
  rec.checks = json::array();
  for (const auto& a : all) {
    const json j = json::parse(a);
    rec.ranks.push_back(report::infer_rank_from_json(j["record"]));
    for (const auto& c : j["checks"]) rec.checks.push_back(c);
    if (j["status"] != "ok" && rec.status == "ok") {
      rec.status = j["status"].get<std::string>();
      rec.error = j["error"].get<std::string>();
    }
  }
  return rec;
}
#endif

// One serving rank: the only one (mpi null), or tp rank mpi->world_rank() of an MPI job.
InferRecord serve_rank(const InferRequest& q, MpiRuntime* mpi) {
  const auto& c = q.config;
#if GPULEDGER_HAVE_MPI
  const int64_t rank_id = mpi ? mpi->world_rank() : 0;
  const int64_t local_rank = mpi ? mpi->local_rank() : 0;  // picks the GPU (core/local_rank.h)
#else
  (void)mpi;
  const int64_t rank_id = 0, local_rank = 0;
#endif
  InferRecord rec;
  rec.request = q;
  rec.peaks = resolve_peaks(q);

  Ledger ledger(*c.device_memory_bytes);
  ledger.enable_events(true);  // replayed through PyTorch's caching allocator for the report
  auto dev = make_device(q.backend, ledger, static_cast<int>(local_rank));
  rec.device_description = dev->description();
  CommCounters counters;
  std::unique_ptr<Comm> self;
  std::optional<Groups> groups;  // MPI: the tp group is the world (dp = pp = 1)
  Comm* tp = nullptr;
  if (mpi) {
    // cuda: NCCL; LayoutError on every rank when np != tp
    groups.emplace(make_mpi_groups(c.layout, counters, *dev, c.model.tied_embeddings, comm_backend_for(q.backend)));
    tp = groups->tp.get();
  } else {
    self = make_self_comm("tp", counters, *dev);
    tp = self.get();
  }
  try {
    serve_and_measure(q, {*dev, ledger, *tp, rank_id, rec.peaks}, rec);
  } catch (const OutOfMemory& e) {
    rec.status = "oom";
    rec.error = e.what();
  }
  // A CPU peak measured at the start that decode then exceeded is measured again (bench/peak.h).
  if (q.backend == "cpu" && !q.peak_flops && rec.peaks.flops && rec.serving && rec.serving->stats.decode_seconds > 0) {
    const auto& st = rec.serving->stats;
    const auto refreshed = bench::refresh_session_peak(static_cast<double>(st.decode_flops) / st.decode_seconds,
                                                       *rec.peaks.flops, rec.peaks.flops_source);
    rec.peaks.flops = refreshed.flops_per_s;
    rec.peaks.flops_source = refreshed.source;
    bench::raise_to_measured(rec.peaks.hardware_flops, rec.peaks.hardware_source, refreshed.flops_per_s,
                             "the sgemm this run measured");
  }
#if GPULEDGER_HAVE_MPI
  if (mpi) {
    InferRankRecord unserved;
    unserved.rank = rank_id;
    const InferRankRecord mine = rec.ranks.empty() ? unserved : rec.ranks.front();
    return gather_on_rank0(std::move(rec), mine, rank_id);
  }
#endif
  return rec;
}

}  // namespace

InferRecord run_infer(const InferRequest& q) {
  const Layout& l = q.config.layout;
  if (l.world() == 1) return serve_rank(q, nullptr);
  if (l.dp != 1 || l.pp != 1)
    throw LayoutError(
        fmt::format("infer parallelises over --tp only (dp = pp = 1), got dp {} tp {} pp {}", l.dp, l.tp, l.pp));
  if (!launched_by_mpi_launcher())
    throw LayoutError(fmt::format("infer --tp {} runs one process per rank: mpirun -np {} gpuledger infer --tp {}",
                                  l.tp, l.tp, l.tp));
#if GPULEDGER_HAVE_MPI
  MpiRuntime mpi;
  return serve_rank(q, &mpi);
#else
  throw LayoutError(fmt::format("infer --tp {} needs MPI, and this binary was built without it", l.tp));
#endif
}

}  // namespace gpuledger::run
