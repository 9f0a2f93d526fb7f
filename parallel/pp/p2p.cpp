// PipeChannel (see p2p.h): deferred sends paired with the next receive.
#include "parallel/pp/p2p.h"

namespace gpuledger {

void PipeChannel::send(const void* buf, int64_t n, DType t, int64_t peer) {
  flush();  // at most one deferred send
  pending_ = true;
  buf_ = buf;
  n_ = n;
  t_ = t;
  peer_ = peer;
}

void PipeChannel::flush() {
  if (!pending_) return;
  pending_ = false;
  pp_.send(buf_, n_, t_, peer_);
}

void PipeChannel::recv(void* buf, int64_t n, DType t, int64_t peer) {
  if (pending_ && peer_ == peer && stage_ > peer) {
    // the higher stage of the pair receives first, then sends
    pp_.recv(buf, n, t, peer);
    flush();
    return;
  }
  flush();  // the lower stage sends first (or the deferred send goes elsewhere)
  pp_.recv(buf, n, t, peer);
}

}  // namespace gpuledger
