// `train` as a typed run: a request (the resolved configuration, the backend,
// the steps, the memory limit, the peak) → run_train → a record: every
// reported rank's run (bench/run/rank_training.h) and what the job's figures are
// taken against (the peak, how many devices it adds up over). Three modes,
// one per-rank runner:
//   one rank                      gpuledger train …
//   an MPI job, one rank each     mpirun -np N gpuledger train --dp … --tp … --pp …
//   a meta simulation             gpuledger train --backend meta --world W --ranks roles|all|LIST
// A failure is a record too (status "oom" or "error", the ledger at the failure).
// Under MPI a failure before the first step is agreed by every rank and reported
// by rank 0; a failure inside a step (when peers are already waiting in a
// collective) makes the failing rank write its record (write_before_abort) and
// abort the job, so that no rank hangs.
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/host_cpu.h"
#include "bench/run/rank_training.h"
#include "core/resolved_config.h"
#include "kernels/device.h"

namespace gpuledger::run {

struct TrainRequest {
  ResolvedConfig config;
  std::string backend = "cpu";           // cpu | meta | cuda
  std::vector<int64_t> simulated_ranks;  // meta, world > 1: the simulated ranks reported (--ranks)
  int64_t steps = 10;
  int64_t warmup = 1;  // first steps left out of the medians
  std::optional<int64_t> memory_limit_bytes;
  std::optional<double> peak_flops;      // per device; default: datasheet, or measured (cpu)
  std::optional<double> cpu_peak_flops;  // cpu, per node: measured once by a sweep for all its points
  std::string cpu_peak_source = "measured once for the sweep: best fp32 sgemm of 1024² and 2048² on the CPU";
  bool timeline = false;
  bool profile = false;
  std::string save_weights;  // a folder: rank 0 writes model.safetensors + config.json after the last step
};

struct TrainPeak {
  std::optional<double> flops;  // per device
  std::string source;
  bool measured_now = false;  // cpu: an sgemm this run measured at its start (refreshed at the end if exceeded)
};

struct TrainRecord {
  TrainRequest request;
  std::vector<bench::RankRun> runs;  // the reported ranks, in rank order
  TrainPeak peak;
  // cpu: cores × FMA width × clock (bench/host_cpu.h) for the whole job (an MPI job:
  // every host's CPUs its ranks may run on), MFU reported against it too
  std::optional<double> hardware_peak_flops;
  std::string hardware_peak_source;
  std::optional<bench::CpuHardwarePeak> hardware_peak_cpu;  // one CPU of it: measured FMA, table, cross-check
  int64_t peak_devices = 1;                                 // devices whose peaks add up to the job's
  std::string device_description;
  std::string mode;                // "one rank", "meta simulation of …", "MPI, …"
  std::vector<std::string> hosts;  // MPI: every rank's host
  // An MPI rank other than 0 reports nothing: its exit status is here.
  std::optional<int> exit_without_report;
};

struct TrainProgress {
  std::ostream* os = nullptr;  // the header and one line per step (nullptr: quiet)
  std::string report_path;     // where the report goes ("" none), for the messages
  // MPI, a failure inside a step: called with this rank's record before the job is aborted.
  std::function<void(const TrainRecord&)> write_before_abort;
};

TrainRecord run_train(const TrainRequest& request, const TrainProgress& progress);

namespace detail {
// The modes (train_run.cpp, train_mpi.cpp).
TrainRecord run_train_in_process(const TrainRequest& q, const TrainProgress& progress, bool simulate);
TrainRecord run_train_mpi_rank(const TrainRequest& q, const TrainProgress& progress);
TrainPeak resolve_train_peak(const TrainRequest& q);
// A peak measured at the run's start that the steps exceeded is measured again
// (bench::refresh_session_peak): the rank that holds every record calls it
// after the runs, alone on its node's cores.
void refresh_exceeded_peak(TrainRecord& rec);
std::unique_ptr<Device> make_train_device(const TrainRequest& q, Ledger& ledger, int local_rank);
}  // namespace detail

}  // namespace gpuledger::run
