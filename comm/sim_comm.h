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
#pragma once
#include <memory>
#include <string>

#include "comm/comm.h"

namespace gpuledger {

class SimComm final : public Comm {
 public:
  SimComm(std::string group, CommCounters& counters, int64_t size, int64_t rank);

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

 private:
  void check_count(int64_t n, const char* what) const;
  void check_peer(int64_t peer, const char* what) const;
  int64_t size_, rank_;
};

std::unique_ptr<Comm> make_sim_comm(std::string group, CommCounters& counters, int64_t size, int64_t rank);

}  // namespace gpuledger
