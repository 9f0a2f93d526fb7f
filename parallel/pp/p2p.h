// PipeChannel: the point-to-point messages of one pipeline stage, on blocking
// Comm send/recv, ordered so that no two neighbouring stages ever both sit in
// a send to each other. Megatron pairs them with batched isend/irecv
// (send_forward_recv_backward); with blocking calls a large (rendezvous)
// message would otherwise deadlock 1F1B's steady state: stage i sends an
// activation to i+1 while i+1 sends a gradient to i.
//
// Rule: a send is deferred until the stage's next receive (the caller flushes
// before it next writes the buffer: the receive, if any, comes first). If that receive is
// from the same peer, the two run as an ordered pair: the lower stage sends
// first then receives, the higher one receives first then sends (the odd-even
// exchange); a receive from another peer (or flush()) first completes the
// deferred send. Every pair of neighbours therefore alternates its messages
// in one agreed order.
#pragma once
#include <cstdint>

#include "comm/comm.h"
#include "core/dtype.h"

namespace gpuledger {

class PipeChannel {
 public:
  PipeChannel(Comm& pp, int64_t stage) : pp_(pp), stage_(stage) {}
  // Queues buf (n elements of t) for `peer`; buf must stay unchanged until the
  // send completes (at the next recv or flush).
  void send(const void* buf, int64_t n, DType t, int64_t peer);
  void recv(void* buf, int64_t n, DType t, int64_t peer);
  void flush();
  // Drops a deferred send without sending it (after a failure).
  void abandon() { pending_ = false; }

 private:
  Comm& pp_;
  int64_t stage_;
  bool pending_ = false;
  const void* buf_ = nullptr;
  int64_t n_ = 0, peer_ = -1;
  DType t_ = DType::kFP32;
};

}  // namespace gpuledger
