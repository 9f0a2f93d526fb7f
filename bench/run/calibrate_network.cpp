// The network of an MPI job, measured and fitted (see calibrate_network.h).
#include "bench/run/calibrate_network.h"

#include <stdexcept>

#include "perf/sourced.h"

#if GPULEDGER_HAVE_MPI
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>

#include "bench/median.h"
#include "bench/peak.h"
#include "bench/report/fingerprint.h"
#include "comm/comm_bytes.h"
#include "comm/mpi_check.h"
#include "comm/mpi_comm.h"
#include "comm/mpi_runtime.h"
#include "perf/alpha_beta_fit.h"
#endif

namespace gpuledger::bench {

NetworkCalibration quick_network_calibration() {
  NetworkCalibration c;
  c.sizes = {8 << 10, 256 << 10, 4 << 20};
  c.warmup = 1;
  c.reps = 3;
  return c;
}

#if GPULEDGER_HAVE_MPI
namespace {

// The median over repetitions of the slowest rank's time of `op`.
template <class F>
double time_point(const NetworkCalibration& c, F&& op) {
  for (int i = 0; i < c.warmup; ++i) op();
  std::vector<double> t;
  // As bench/peak.h time_median_cold: a step's collective finds its buffers
  // out of the cores' caches, after the compute that wrote them.
  CacheEvictor evictor;
  for (int i = 0; i < c.reps; ++i) {
    evictor.evict(i);
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD), "lining up a timed collective");
    const auto t0 = std::chrono::steady_clock::now();
    op();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), "the slowest rank's time");
    t.push_back(s);
  }
  evictor.check(c.reps - 1);
  return median(t);
}

std::vector<perf::CollectiveSample> measure_collectives(const NetworkCalibration& c, MpiComm& world,
                                                        std::ostream& progress) {
  const int64_t n = world.size(), rank = world.rank();
  std::vector<perf::CollectiveSample> samples;
  auto record = [&](CommKind kind, int64_t group, int64_t bytes, double s) {
    samples.push_back({kind, group, bytes, s});
    if (rank == 0)
      progress << fmt::format("calibrate: {} over {} ranks, {} bytes: {:.3g} us, busbw {:.3g} GB/s\n",
                              comm_kind_name(kind), group, bytes, s * 1e6, bytes * busbw_factor(kind, group) / s / 1e9);
  };
  const DType t = c.dtype;
  const int64_t eb = dtype_bytes(t);
  for (int64_t size : c.sizes) {
    const int64_t whole = std::max<int64_t>(1, size / eb);        // all-reduce, send: elements of the buffer
    const int64_t slice = std::max<int64_t>(1, size / (eb * n));  // all-gather, reduce-scatter: per rank
    const size_t elems = static_cast<size_t>(std::max(whole, slice * n));
    // Raw bytes: a 16-bit buffer is moved and reduced as the runs' are; the
    // values (zero bits: 0.0 in every format) do not change the time.
    std::vector<char> buf(elems * static_cast<size_t>(eb), 0), out(buf.size(), 0);
    record(CommKind::kAllReduce, n, comm_call_bytes(CommKind::kAllReduce, whole, t, n),
           time_point(c, [&] { world.all_reduce_start(buf.data(), whole, t)->wait(); }));
    record(CommKind::kAllGather, n, comm_call_bytes(CommKind::kAllGather, slice, t, n),
           time_point(c, [&] { world.all_gather_start(out.data(), buf.data(), slice, t)->wait(); }));
    record(CommKind::kReduceScatter, n, comm_call_bytes(CommKind::kReduceScatter, slice, t, n),
           time_point(c, [&] { world.reduce_scatter_start(out.data(), buf.data(), slice, t)->wait(); }));
    // Pairs (0↔1, 2↔3, …); with an odd world the last rank only takes part in the timing.
    const int64_t peer = rank ^ 1;
    const bool paired = peer < n;
    record(CommKind::kSend, 2, comm_call_bytes(CommKind::kSend, whole, t, 2), time_point(c, [&] {
             if (!paired) return;
             if (rank % 2 == 0)
               world.send(buf.data(), whole, t, peer);
             else
               world.recv(out.data(), whole, t, peer);
           }));
  }
  return samples;
}

perf::NetworkProfile fit_profile(const NetworkCalibration& c, std::vector<perf::CollectiveSample> samples,
                                 const std::vector<std::string>& hosts) {
  std::map<std::string, int64_t> per_host;
  for (const auto& h : hosts) ++per_host[h];
  int64_t fewest = static_cast<int64_t>(hosts.size());
  for (const auto& [h, count] : per_host) fewest = std::min(fewest, count);
  const perf::AlphaBetaFit fit = perf::fit_alpha_beta(samples);
  const std::string how = fmt::format(
      "measured by gpuledger calibrate: least squares over {} samples of all_reduce, all_gather, reduce_scatter and "
      "send over MPI in {} (weights 1/t², rms relative error {:.1f} %)",
      fit.samples, dtype_name(c.dtype), 100 * fit.rms_relative_error);
  perf::NetworkProfile p;
  p.name = c.name;
  p.fingerprint = {{"hosts", hosts}, {"machine", report::machine_fingerprint()}};
  p.provenance = {perf::kMeasured, report::utc_timestamp(), c.command};
  p.ranks_per_node = {static_cast<double>(per_host.at(hosts.front())),
                      "measured: the ranks of this job on rank 0's host"};
  if (per_host.size() == 1) {
    p.intra_node = perf::LinkFigures{"mpi-shared-memory", {fit.alpha_seconds, how}, {fit.beta_bytes_per_s, how}};
  } else {
    p.inter_node = perf::LinkFigures{
        "mpi-inter-host",
        {fit.alpha_seconds, how},
        {fit.beta_bytes_per_s / static_cast<double>(fewest),
         how + fmt::format("; the world's busbw over the {} ranks of the host with the fewest", fewest)}};
  }
  p.samples = std::move(samples);
  perf::validate_network_profile(p);
  return p;
}

// The ranks meet here after the device measurement: a nonblocking barrier
// polled every 10 ms, so that a rank that finished first does not spin on a
// core another rank is still measuring.
void polled_barrier() {
  MPI_Request req;
  MPI_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &req), "waiting for the other ranks' device measurements");
  int done = 0;
  while (!done) {
    MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "waiting for the other ranks' device measurements");
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

MpiCalibration calibrate_under_mpi(const NetworkCalibration& c, const std::function<void(bool)>& device_work,
                                   std::ostream& progress) {
  MpiRuntime mpi;
  MpiCalibration out;
  out.is_rank0 = mpi.world_rank() == 0;
  out.world_size = mpi.world_size();
  const auto hosts = gather_strings(mpi.hostname());
  if (mpi.world_size() > 1) {
    CommCounters counters;
    MpiComm world("world", counters, MPI_COMM_WORLD);
    auto samples = measure_collectives(c, world, progress);
    if (out.is_rank0) out.network = fit_profile(c, std::move(samples), hosts);
  }
  MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD), "starting the device measurement together");
  // Every timed call in lockstep (bench/peak.h set_timing_barrier).
  set_timing_barrier([] { MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD), "lining up a timed device call"); });
  try {
    device_work(out.is_rank0);
  } catch (...) {
    set_timing_barrier({});
    polled_barrier();  // release the others before the error ends this rank
    throw;
  }
  set_timing_barrier({});
  polled_barrier();
  return out;
}

#else

MpiCalibration calibrate_under_mpi(const NetworkCalibration&, const std::function<void(bool)>&, std::ostream&) {
  throw std::runtime_error("calibrate under an MPI launcher: this binary was built without MPI");
}

#endif

}  // namespace gpuledger::bench
