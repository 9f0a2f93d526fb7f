// The request and record of `train`: the steps, the backend, the memory limit
// and the peak asked for; per reported rank its measured ledger, comm counters,
// FLOPs and times beside its analytic budget, a failure included; and what the
// job's figures are taken against. bench/run/train_run.h and rank_training.h
// fill them and bench/report/train_json.h writes them; the types sit below
// both, so that report/ needs nothing of run/.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/host_cpu.h"
#include "bench/record/ledger_record.h"
#include "bench/record/plan_record.h"
#include "bench/record/step_prediction.h"
#include "comm/comm.h"
#include "core/resolved_config.h"
#include "core/trace.h"
#include "kernels/profiling_device.h"

namespace gpuledger::bench {

// One rank's record: ranks[i] of the report.
struct TrainRankRecord {
  run::PlanRankRecord analytic;           // the rank's exact budget, published rows, analytic comm and FLOPs
  LedgerRecord measured;                  // the ledger when the run ended (or failed)
  std::map<std::string, CommCount> comm;  // per collective@group, over every step run
  std::vector<double> step_ms;            // every step run, warm-up included
  std::vector<int64_t> step_peak_bytes;   // the ledger's running peak after each step
  // MoE models: per step, the routing choices this rank dropped past an
  // expert's capacity (its layers and microbatches; 0 without a capacity factor)
  std::vector<int64_t> moe_dropped_choices;
  double median_step_ms = 0, median_compute_ms = 0, median_comm_ms = 0;  // warm-up left out
  std::optional<int64_t> executed_flops_per_step;                        // none when no step ran
  bool executed_same_every_step = true;
  std::optional<std::map<std::string, OpTime>> op_time;  // --profile: per op, the timed steps
  std::vector<TraceSlice> trace;                         // --trace: every op and collective, every step
  int64_t trace_dropped = 0;                             // slices past the recorder's cap
  std::string status = "ok";                             // ok | oom | error
  std::string error;
};

struct RankRun {
  TrainRankRecord record;
  std::vector<double> losses;
  bool failed_in_step = false;  // inside a step: peers may be waiting in a collective
};

}  // namespace gpuledger::bench

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
  bool trace = false;        // every op and collective as trace slices in each rank's record (needs profile)
  std::string save_weights;  // a folder: rank 0 writes model.safetensors + config.json after the last step
  // The profiles the step is predicted on (--device-profile, --network-profile,
  // or the published ones of the --device preset on meta); none: no prediction.
  std::optional<PerfProfiles> profiles;
  bool predicted_trace = false;  // keep the prediction's simulated timeline (train --backend meta --trace)
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
  std::string mode;                          // "one rank", "meta simulation of …", "MPI, …"
  std::vector<std::string> hosts;            // MPI: every rank's host
  std::optional<StepPrediction> prediction;  // when the request had profiles
  // An MPI rank other than 0 reports nothing: its exit status is here.
  std::optional<int> exit_without_report;
};

}  // namespace gpuledger::run
