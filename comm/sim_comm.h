// SimComm: the communicator of one simulated rank in the meta backend's
// simulation of a W-rank world inside one process (train --backend meta
// --world W). It has a group size and a rank in that group but moves nothing
// (buffers may be null: the meta Device allocates none), and books exactly the
// calls and bytes a real comm of that size books for the same call
// (comm_bytes.h, the sizing MpiComm and NCCL use), with 0 seconds. send and
// recv book too, though no peer ever receives. barrier books nothing.
//
// Arguments are checked (peer or root outside the group, negative counts, and
// a send/recv to itself, which would block a real rank), so a simulated run
// fails where the real one would.
//
// Given the group's world ranks and a step-program sink (core/step_program.h),
// it also reports every call as the rank issues it — blocking, or started
// (the *_start calls) and waited for — so that the step simulator can replay
// the rank's communication (perf/sim/program_recorder.h). A started call is
// booked at its start; its wait is reported once, at wait() or when the
// request is destroyed unwaited (as a real request waits then).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "core/step_program.h"

namespace gpuledger {

class SimComm final : public Comm {
 public:
  SimComm(std::string group, CommCounters& counters, int64_t size, int64_t rank);
  // `members`: the group's world ranks in group order (size of them);
  // `sink`: where the calls are reported (nullptr: nowhere).
  SimComm(std::string group, CommCounters& counters, std::vector<int64_t> members, int64_t rank, StepProgramSink* sink);

  int64_t size() const override { return size_; }
  int64_t rank() const override { return rank_; }

  void all_reduce(void* buf, int64_t n, DType t, ReduceOp op = ReduceOp::kSum) override;
  void all_gather(void* out, const void* in, int64_t n, DType t) override;
  void reduce_scatter(void* out, const void* in, int64_t n, DType t) override;
  void all_to_all(void* out, const void* in, int64_t n, DType t) override;
  void broadcast(void* buf, int64_t n, DType t, int64_t root) override;
  void send(const void* buf, int64_t n, DType t, int64_t peer) override;
  void recv(void* buf, int64_t n, DType t, int64_t peer) override;
  void barrier() override {}

  CommHandle all_reduce_start(void* buf, int64_t n, DType t, ReduceOp op = ReduceOp::kSum) override;
  CommHandle all_gather_start(void* out, const void* in, int64_t n, DType t) override;
  CommHandle reduce_scatter_start(void* out, const void* in, int64_t n, DType t) override;
  CommHandle send_recv_start(const void* send, int64_t n_send, int64_t to, void* recv, int64_t n_recv, int64_t from,
                             DType t) override;

 private:
  void check_count(int64_t n, const char* what) const;
  void check_peer(int64_t peer, const char* what) const;
  // Checks and books one call; returns its bytes as booked.
  int64_t book_call(CommKind kind, int64_t n, DType t, int64_t peer, const char* what);
  void report(CommMode mode, CommKind kind, int64_t bytes, int64_t peer, int64_t handle) const;
  CommHandle started(CommKind kind, int64_t bytes, int64_t peer);
  int64_t size_, rank_;
  std::vector<int64_t> members_;  // world ranks (empty without a sink)
  StepProgramSink* sink_ = nullptr;
  int64_t next_handle_ = 0;
};

std::unique_ptr<Comm> make_sim_comm(std::string group, CommCounters& counters, int64_t size, int64_t rank);

}  // namespace gpuledger
