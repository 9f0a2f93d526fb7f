// CommCounters, kind names and the one-rank communicator (see comm.h).
#include "comm/comm.h"

#include <stdexcept>

#include "kernels/device.h"

namespace gpuledger {

void CommCounters::add(CommKind kind, std::string_view group, int64_t bytes, double seconds) {
  auto& c = counts_[std::string(comm_kind_name(kind)) + "@" + std::string(group)];
  c.calls += 1;
  c.bytes += bytes;
  c.seconds += seconds;
  if (trace_) {
    const double end_us = TraceRecorder::now_us();
    trace_->add({"comm " + std::string(group), std::string(comm_kind_name(kind)), end_us - seconds * 1e6, seconds * 1e6,
                 0, bytes});
  }
}

namespace {

// The request of a collective that already ran inside its start call.
class CompletedRequest final : public CommRequest {
 public:
  void wait() override {}
  bool test() override { return true; }
};

}  // namespace

CommHandle Comm::all_reduce_start(void* buf, int64_t n, DType t, ReduceOp op) {
  all_reduce(buf, n, t, op);
  return std::make_unique<CompletedRequest>();
}

CommHandle Comm::all_gather_start(void* out, const void* in, int64_t n, DType t) {
  all_gather(out, in, n, t);
  return std::make_unique<CompletedRequest>();
}

CommHandle Comm::reduce_scatter_start(void* out, const void* in, int64_t n, DType t) {
  reduce_scatter(out, in, n, t);
  return std::make_unique<CompletedRequest>();
}

CommHandle Comm::send_recv_start(const void* send_buf, int64_t n_send, int64_t to, void* recv_buf, int64_t n_recv,
                                 int64_t from, DType t) {
  if (rank() % 2 == 0) {
    send(send_buf, n_send, t, to);
    recv(recv_buf, n_recv, t, from);
  } else {
    recv(recv_buf, n_recv, t, from);
    send(send_buf, n_send, t, to);
  }
  return std::make_unique<CompletedRequest>();
}

namespace {

class SelfComm final : public Comm {
 public:
  SelfComm(std::string group, CommCounters& counters, Device& device)
      : Comm(std::move(group), counters), device_(device) {}
  int64_t size() const override { return 1; }
  int64_t rank() const override { return 0; }
  void all_reduce(void*, int64_t, DType, ReduceOp) override {}
  void all_gather(void* out, const void* in, int64_t n, DType t) override {
    if (out != in) device_.copy(out, in, n * dtype_bytes(t));
  }
  void reduce_scatter(void* out, const void* in, int64_t n, DType t) override {
    if (out != in) device_.copy(out, in, n * dtype_bytes(t));
  }
  void all_to_all(void* out, const void* in, int64_t n, DType t) override {
    if (out != in) device_.copy(out, in, n * dtype_bytes(t));
  }
  void broadcast(void*, int64_t, DType, int64_t) override {}
  void send(const void*, int64_t, DType, int64_t) override {
    throw std::logic_error("send on the one-rank group '" + group() + "'");
  }
  void recv(void*, int64_t, DType, int64_t) override {
    throw std::logic_error("recv on the one-rank group '" + group() + "'");
  }
  void barrier() override {}

 private:
  Device& device_;
};

}  // namespace

std::unique_ptr<Comm> make_self_comm(std::string group, CommCounters& counters, Device& device) {
  return std::make_unique<SelfComm>(std::move(group), counters, device);
}

}  // namespace gpuledger
