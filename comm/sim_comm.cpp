// SimComm: books what a real comm of the same size books, moves nothing (see sim_comm.h).
#include "comm/sim_comm.h"

#include <functional>
#include <stdexcept>

#include "comm/comm_bytes.h"

namespace gpuledger {

SimComm::SimComm(std::string group, CommCounters& counters, int64_t size, int64_t rank)
    : Comm(std::move(group), counters), size_(size), rank_(rank) {
  if (size < 1 || rank < 0 || rank >= size)
    throw std::invalid_argument("SimComm '" + this->group() + "': rank " + std::to_string(rank) + " in a group of " +
                                std::to_string(size));
}

SimComm::SimComm(std::string group, CommCounters& counters, std::vector<int64_t> members, int64_t rank,
                 StepProgramSink* sink)
    : SimComm(std::move(group), counters, static_cast<int64_t>(members.size()), rank) {
  members_ = std::move(members);
  sink_ = sink;
}

void SimComm::check_count(int64_t n, const char* what) const {
  if (n < 0)
    throw std::invalid_argument(std::string(what) + " on '" + group() + "': negative count " + std::to_string(n));
}

void SimComm::check_peer(int64_t peer, const char* what) const {
  if (peer < 0 || peer >= size_ || peer == rank_)
    throw std::invalid_argument(std::string(what) + " on '" + group() + "': peer " + std::to_string(peer) +
                                " from rank " + std::to_string(rank_) + " of " + std::to_string(size_));
}

int64_t SimComm::book_call(CommKind kind, int64_t n, DType t, int64_t peer, const char* what) {
  check_count(n, what);
  if (kind == CommKind::kSend || kind == CommKind::kRecv) check_peer(peer, what);
  const int64_t bytes = comm_call_bytes(kind, n, t, size_);
  book(kind, bytes, 0.0);
  return bytes;
}

void SimComm::report(CommMode mode, CommKind kind, int64_t bytes, int64_t peer, int64_t handle) const {
  if (!sink_) return;
  CommCall c;
  c.mode = mode;
  c.kind = kind;
  c.group = group();
  c.bytes = bytes;
  c.members = &members_;
  c.world_rank = members_[static_cast<size_t>(rank_)];
  c.peer_world_rank = peer >= 0 ? members_[static_cast<size_t>(peer)] : -1;
  c.handle = handle;
  sink_->on_comm(c);
}

void SimComm::all_reduce(void*, int64_t n, DType t, ReduceOp) {
  report(CommMode::kBlocking, CommKind::kAllReduce, book_call(CommKind::kAllReduce, n, t, -1, "all_reduce"), -1, -1);
}

void SimComm::all_gather(void*, const void*, int64_t n, DType t) {
  report(CommMode::kBlocking, CommKind::kAllGather, book_call(CommKind::kAllGather, n, t, -1, "all_gather"), -1, -1);
}

void SimComm::reduce_scatter(void*, const void*, int64_t n, DType t) {
  report(CommMode::kBlocking, CommKind::kReduceScatter, book_call(CommKind::kReduceScatter, n, t, -1, "reduce_scatter"),
         -1, -1);
}

void SimComm::all_to_all(void*, const void*, int64_t n, DType t) {
  report(CommMode::kBlocking, CommKind::kAllToAll, book_call(CommKind::kAllToAll, n, t, -1, "all_to_all"), -1, -1);
}

void SimComm::broadcast(void*, int64_t n, DType t, int64_t root) {
  check_count(n, "broadcast");
  if (root < 0 || root >= size_)
    throw std::invalid_argument("broadcast on '" + group() + "': root " + std::to_string(root) +
                                " outside the group of " + std::to_string(size_));
  const int64_t bytes = comm_call_bytes(CommKind::kBroadcast, n, t, size_);
  book(CommKind::kBroadcast, bytes, 0.0);
  report(CommMode::kBlocking, CommKind::kBroadcast, bytes, -1, -1);
}

void SimComm::send(const void*, int64_t n, DType t, int64_t peer) {
  report(CommMode::kBlocking, CommKind::kSend, book_call(CommKind::kSend, n, t, peer, "send"), peer, -1);
}

void SimComm::recv(void*, int64_t n, DType t, int64_t peer) {
  report(CommMode::kBlocking, CommKind::kRecv, book_call(CommKind::kRecv, n, t, peer, "recv"), peer, -1);
}

namespace {

// A started call of the simulation: nothing is in flight; its wait is reported once.
class SimRequest final : public CommRequest {
 public:
  using Report = std::function<void()>;
  explicit SimRequest(Report on_wait) : on_wait_(std::move(on_wait)) {}
  ~SimRequest() override { wait(); }
  void wait() override {
    if (!on_wait_) return;
    auto r = std::move(on_wait_);
    on_wait_ = nullptr;
    r();
  }
  bool test() override { return true; }

 private:
  Report on_wait_;
};

}  // namespace

CommHandle SimComm::started(CommKind kind, int64_t bytes, int64_t peer) {
  const int64_t handle = next_handle_++;
  report(CommMode::kStart, kind, bytes, peer, handle);
  if (!sink_) return std::make_unique<SimRequest>(nullptr);
  return std::make_unique<SimRequest>([this, kind, handle] { report(CommMode::kWait, kind, 0, -1, handle); });
}

CommHandle SimComm::all_reduce_start(void*, int64_t n, DType t, ReduceOp) {
  return started(CommKind::kAllReduce, book_call(CommKind::kAllReduce, n, t, -1, "all_reduce"), -1);
}

CommHandle SimComm::all_gather_start(void*, const void*, int64_t n, DType t) {
  return started(CommKind::kAllGather, book_call(CommKind::kAllGather, n, t, -1, "all_gather"), -1);
}

CommHandle SimComm::reduce_scatter_start(void*, const void*, int64_t n, DType t) {
  return started(CommKind::kReduceScatter, book_call(CommKind::kReduceScatter, n, t, -1, "reduce_scatter"), -1);
}

// The ring exchange's send and recv, booked as the default does (one send,
// one recv); reported as one started transfer of the send's bytes to `to`.
CommHandle SimComm::send_recv_start(const void*, int64_t n_send, int64_t to, void*, int64_t n_recv, int64_t from,
                                    DType t) {
  const int64_t bytes = book_call(CommKind::kSend, n_send, t, to, "send");
  book_call(CommKind::kRecv, n_recv, t, from, "recv");
  return started(CommKind::kSend, bytes, to);
}

std::unique_ptr<Comm> make_sim_comm(std::string group, CommCounters& counters, int64_t size, int64_t rank) {
  return std::make_unique<SimComm>(std::move(group), counters, size, rank);
}

}  // namespace gpuledger
