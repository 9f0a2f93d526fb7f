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
// The request and record types: bench/record/train_record.h.
#pragma once
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>

#include "bench/record/train_record.h"
#include "bench/run/rank_training.h"
#include "kernels/device.h"

namespace gpuledger::run {

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
