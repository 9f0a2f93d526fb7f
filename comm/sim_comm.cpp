// SimComm: books what a real comm of the same size books, moves nothing (see sim_comm.h).
#include "comm/sim_comm.h"

#include <stdexcept>

#include "comm/comm_bytes.h"

namespace gpuledger {

SimComm::SimComm(std::string group, CommCounters& counters, int64_t size, int64_t rank)
    : Comm(std::move(group), counters), size_(size), rank_(rank) {
  if (size < 1 || rank < 0 || rank >= size)
    throw std::invalid_argument("SimComm '" + this->group() + "': rank " + std::to_string(rank) + " in a group of " +
                                std::to_string(size));
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

void SimComm::all_reduce(void*, int64_t n, DType t, ReduceOp) {
  check_count(n, "all_reduce");
  book(CommKind::kAllReduce, comm_call_bytes(CommKind::kAllReduce, n, t, size_), 0.0);
}

void SimComm::all_gather(void*, const void*, int64_t n, DType t) {
  check_count(n, "all_gather");
  book(CommKind::kAllGather, comm_call_bytes(CommKind::kAllGather, n, t, size_), 0.0);
}

void SimComm::reduce_scatter(void*, const void*, int64_t n, DType t) {
  check_count(n, "reduce_scatter");
  book(CommKind::kReduceScatter, comm_call_bytes(CommKind::kReduceScatter, n, t, size_), 0.0);
}

void SimComm::all_to_all(void*, const void*, int64_t n, DType t) {
  check_count(n, "all_to_all");
  book(CommKind::kAllToAll, comm_call_bytes(CommKind::kAllToAll, n, t, size_), 0.0);
}

void SimComm::broadcast(void*, int64_t n, DType t, int64_t root) {
  check_count(n, "broadcast");
  if (root < 0 || root >= size_)
    throw std::invalid_argument("broadcast on '" + group() + "': root " + std::to_string(root) +
                                " outside the group of " + std::to_string(size_));
  book(CommKind::kBroadcast, comm_call_bytes(CommKind::kBroadcast, n, t, size_), 0.0);
}

void SimComm::send(const void*, int64_t n, DType t, int64_t peer) {
  check_count(n, "send");
  check_peer(peer, "send");
  book(CommKind::kSend, comm_call_bytes(CommKind::kSend, n, t, size_), 0.0);
}

void SimComm::recv(void*, int64_t n, DType t, int64_t peer) {
  check_count(n, "recv");
  check_peer(peer, "recv");
  book(CommKind::kRecv, comm_call_bytes(CommKind::kRecv, n, t, size_), 0.0);
}

std::unique_ptr<Comm> make_sim_comm(std::string group, CommCounters& counters, int64_t size, int64_t rank) {
  return std::make_unique<SimComm>(std::move(group), counters, size, rank);
}

}  // namespace gpuledger
