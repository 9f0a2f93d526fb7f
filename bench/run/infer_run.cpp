// Serving on one rank (see infer_run.h).
#include "bench/run/infer_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "analytic/params.h"
#include "bench/checks.h"
#include "bench/exit_codes.h"
#include "bench/peak.h"
#include "bench/report/report.h"
#include "bench/run/infer_serve.h"
#include "bench/run/launcher.h"
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

// On the CPU both peaks are measured now, in this session, on a device of their
// own; elsewhere they come from the device's datasheet.
InferPeaks resolve_peaks(const InferRequest& q) {
  InferPeaks p;
  const auto& device = q.config.device;
  if (q.backend == "cpu") {
    Ledger scratch;
    auto dev = make_device("cpu", scratch);
    const auto bw = bench::measure_bandwidth(*dev, int64_t{64} << 20, 1, 5);
    p.bandwidth = bw.bytes_per_s;
    p.bandwidth_source = "measured now: STREAM add over 3 × 64 MiB arrays on the cpu backend";
    const auto peak = bench::measure_cpu_session_peak();
    p.flops = peak.flops_per_s;
    p.flops_source = peak.source;
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

json infer_config_json(const InferRequest& q) {
  json c = report::config_json(q.config);
  c["infer"] = {{"kv", kv_layout_name(q.kv.layout)}, {"kv_dtype", kv_format_name(q.kv.dtype)},
                {"kv_scales", kv_scales_name(q.kv.scales)}, {"block", q.kv.block},
                {"max_model_len", q.kv.max_model_len}, {"context", q.context},
                {"requests", static_cast<int64_t>(q.shapes.size())}, {"prompt_len", q.prompt_len},
                {"gen_len", q.gen_len}, {"trace", q.trace}, {"max_batch", q.max_batch},
                {"prefill_chunk", q.prefill_chunk}, {"prefix_len", q.prefix_len},
                {"memory_utilization", q.memory_utilization},
                {"device_memory_bytes", *q.config.device_memory_bytes}, {"overhead_bytes", q.overhead_bytes},
                {"kv_outliers", q.kv_outliers}};
  return c;
}

#if GPULEDGER_HAVE_MPI
// Rank 0 gathers every rank's record and checks; the summary is rank 0's.
InferRecord gather_on_rank0(json doc, const json& rank_record, int64_t rank_id) {
  json mine = {{"record", doc.contains("ranks") ? doc["ranks"][0] : rank_record}, {"checks", doc["checks"]},
               {"status", doc["status"]}, {"error", doc.value("error", "")}};
  const auto all = gather_strings(mine.dump());
  const bool ok = doc["status"] == "ok" && bench::all_ok(doc["checks"]);
  if (rank_id != 0) return {json(), ok ? cli::kExitOk : cli::kExitFailed};
  doc["ranks"] = json::array();
  doc["checks"] = json::array();
  for (const auto& a : all) {
    const json j = json::parse(a);
    doc["ranks"].push_back(j["record"]);
    for (const auto& c : j["checks"]) doc["checks"].push_back(c);
    if (j["status"] != "ok" && doc["status"] == "ok") {
      doc["status"] = j["status"];
      doc["error"] = j["error"];
    }
  }
  return {doc, std::nullopt};
}
#endif

// One serving rank: the only one (mpi null), or tp rank mpi->world_rank() of an MPI job.
InferRecord serve_rank(const InferRequest& q, MpiRuntime* mpi) {
  const auto& c = q.config;
#if GPULEDGER_HAVE_MPI
  const int64_t rank_id = mpi ? mpi->world_rank() : 0;
#else
  (void)mpi;
  const int64_t rank_id = 0;
#endif
  json doc = report::make_report("infer");
  doc["env"]["backend"] = q.backend;
  doc["env"]["world"] = c.layout.world();
  doc["config"] = infer_config_json(q);
  doc["params"] = {{"total", analytic::model_params(c.model)}};
  const InferPeaks peaks = resolve_peaks(q);

  Ledger ledger(*c.device_memory_bytes);
  auto dev = make_device(q.backend, ledger, static_cast<int>(rank_id));
  doc["env"]["device"] = dev->description();
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
  json rank = {{"rank", rank_id}, {"coords", {{"dp", 0}, {"tp", rank_id}, {"pp", 0}}}};
  doc["checks"] = json::array();
  try {
    serve_and_measure(q, {*dev, ledger, *tp, rank_id, peaks}, rank, doc);
  } catch (const OutOfMemory& e) {
    doc["status"] = "oom";
    doc["error"] = e.what();
  }
#if GPULEDGER_HAVE_MPI
  if (mpi) return gather_on_rank0(std::move(doc), rank, rank_id);
#endif
  return {doc, std::nullopt};
}

}  // namespace

InferRecord run_infer(const InferRequest& q) {
  const Layout& l = q.config.layout;
  if (l.world() == 1) return serve_rank(q, nullptr);
  if (l.dp != 1 || l.pp != 1)
    throw LayoutError(fmt::format("infer parallelises over --tp only (dp = pp = 1), got dp {} tp {} pp {}", l.dp,
                                  l.tp, l.pp));
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
