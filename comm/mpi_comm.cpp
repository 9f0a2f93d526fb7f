// MpiComm: Comm on host buffers over an MPI communicator (see mpi_comm.h).
#include "comm/mpi_comm.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <stdexcept>

#include "comm/comm_bytes.h"
#include "comm/mpi_check.h"

namespace gpuledger {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// MPI counts are int: refuse what does not fit rather than wrap.
int mpi_count(int64_t n, const std::string& group, const char* what) {
  if (n < 0) throw std::invalid_argument(std::string(what) + " on '" + group + "': negative count");
  if (n > INT_MAX)
    throw std::length_error(std::string(what) + " on '" + group + "': " + std::to_string(n) +
                            " elements exceed MPI's int count");
  return static_cast<int>(n);
}

// The MPI type that moves (not reduces) elements of `t`: 16-bit values are opaque halves.
MPI_Datatype move_type(DType t) { return t == DType::kFP32 ? MPI_FLOAT : MPI_UINT16_T; }

MPI_Op mpi_op(ReduceOp op) { return op == ReduceOp::kMax ? MPI_MAX : MPI_SUM; }

std::string describe(const char* what, int64_t n, DType t, const std::string& group) {
  return std::string(what) + " " + std::to_string(n) + " " + std::string(dtype_name(t)) + " elements over '" + group +
         "'";
}

}  // namespace

MpiComm::MpiComm(std::string group, CommCounters& counters, MPI_Comm comm)
    : Comm(std::move(group), counters), comm_(comm) {
  int size = 0, rank = 0;
  MPI_CHECK(MPI_Comm_size(comm_, &size), "reading the size of group '" + this->group() + "'");
  MPI_CHECK(MPI_Comm_rank(comm_, &rank), "reading this rank in group '" + this->group() + "'");
  size_ = size;
  rank_ = rank;
}

MpiComm::~MpiComm() {
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (finalised || comm_ == MPI_COMM_WORLD || comm_ == MPI_COMM_SELF || comm_ == MPI_COMM_NULL) return;
  MPI_CHECK_NOTHROW(MPI_Comm_free(&comm_), "freeing the communicator of group '" + group() + "'");
}

void MpiComm::all_reduce(void* buf, int64_t n, DType t, ReduceOp op) {
  const auto t0 = Clock::now();
  const int count = mpi_count(n, group(), "all_reduce");
  if (t == DType::kFP32) {
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, mpi_op(op), comm_),
              describe("all-reducing", n, t, group()));
  } else {
    // 16-bit: one fp32 reduction, one rounding back (see the header).
    stage_in_.resize(static_cast<size_t>(n));
    convert_to_fp32(buf, t, stage_in_.data(), n);
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, stage_in_.data(), count, MPI_FLOAT, mpi_op(op), comm_),
              describe("all-reducing (fp32 staging of)", n, t, group()));
    convert_from_fp32(stage_in_.data(), buf, t, n);
  }
  book(CommKind::kAllReduce, comm_call_bytes(CommKind::kAllReduce, n, t, size_), seconds_since(t0));
}

void MpiComm::all_gather(void* out, const void* in, int64_t n, DType t) {
  const auto t0 = Clock::now();
  const int count = mpi_count(n, group(), "all_gather");
  mpi_count(n * size_, group(), "all_gather (output)");
  // In place when `in` is already this rank's slice of `out` (MPI forbids aliasing otherwise).
  const void* send = in;
  if (in == static_cast<const char*>(out) + rank_ * n * dtype_bytes(t)) send = MPI_IN_PLACE;
  MPI_CHECK(MPI_Allgather(send, count, move_type(t), out, count, move_type(t), comm_),
            describe("all-gathering", n, t, group()));
  book(CommKind::kAllGather, comm_call_bytes(CommKind::kAllGather, n, t, size_), seconds_since(t0));
}

void MpiComm::reduce_scatter(void* out, const void* in, int64_t n, DType t) {
  const auto t0 = Clock::now();
  const int count = mpi_count(n, group(), "reduce_scatter");
  const int64_t total = n * size_;
  mpi_count(total, group(), "reduce_scatter (input)");
  if (t == DType::kFP32) {
    if (in == out) {
      // In place: the input is read from `out` (n · size) and the slice lands at its start.
      MPI_CHECK(MPI_Reduce_scatter_block(MPI_IN_PLACE, out, count, MPI_FLOAT, MPI_SUM, comm_),
                describe("reduce-scattering", n, t, group()));
    } else {
      MPI_CHECK(MPI_Reduce_scatter_block(in, out, count, MPI_FLOAT, MPI_SUM, comm_),
                describe("reduce-scattering", n, t, group()));
    }
  } else {
    stage_in_.resize(static_cast<size_t>(total));
    stage_out_.resize(static_cast<size_t>(n));
    convert_to_fp32(in, t, stage_in_.data(), total);
    MPI_CHECK(MPI_Reduce_scatter_block(stage_in_.data(), stage_out_.data(), count, MPI_FLOAT, MPI_SUM, comm_),
              describe("reduce-scattering (fp32 staging of)", n, t, group()));
    convert_from_fp32(stage_out_.data(), out, t, n);
  }
  book(CommKind::kReduceScatter, comm_call_bytes(CommKind::kReduceScatter, n, t, size_), seconds_since(t0));
}

void MpiComm::all_to_all(void* out, const void* in, int64_t n, DType t) {
  const auto t0 = Clock::now();
  const int count = mpi_count(n, group(), "all_to_all");
  const int64_t total_bytes = n * size_ * dtype_bytes(t);
  mpi_count(n * size_, group(), "all_to_all (buffer)");
  // MPI forbids aliased send and receive buffers (MPI_IN_PLACE aside, which the Comm contract does not offer).
  const auto* o = static_cast<const char*>(out);
  const auto* i = static_cast<const char*>(in);
  if (total_bytes > 0 && o < i + total_bytes && i < o + total_bytes)
    throw std::invalid_argument("all_to_all on '" + group() + "': the send and receive buffers overlap");
  MPI_CHECK(MPI_Alltoall(in, count, move_type(t), out, count, move_type(t), comm_),
            describe("all-to-all of", n, t, group()) + " per peer");
  book(CommKind::kAllToAll, comm_call_bytes(CommKind::kAllToAll, n, t, size_), seconds_since(t0));
}

void MpiComm::broadcast(void* buf, int64_t n, DType t, int64_t root) {
  const auto t0 = Clock::now();
  const int count = mpi_count(n, group(), "broadcast");
  if (root < 0 || root >= size_)
    throw std::invalid_argument("broadcast on '" + group() + "': root " + std::to_string(root) +
                                " outside the group of " + std::to_string(size_));
  MPI_CHECK(MPI_Bcast(buf, count, move_type(t), static_cast<int>(root), comm_),
            describe("broadcasting", n, t, group()) + " from root " + std::to_string(root));
  book(CommKind::kBroadcast, comm_call_bytes(CommKind::kBroadcast, n, t, size_), seconds_since(t0));
}

// Peers are not range-checked here: MPI reports a bad rank (MPI_ERR_RANK) through MPI_CHECK.
void MpiComm::send(const void* buf, int64_t n, DType t, int64_t peer) {
  const auto t0 = Clock::now();
  const int count = mpi_count(n, group(), "send");
  MPI_CHECK(MPI_Send(buf, count, move_type(t), static_cast<int>(peer), kTag, comm_),
            describe("sending", n, t, group()) + " to peer " + std::to_string(peer));
  book(CommKind::kSend, comm_call_bytes(CommKind::kSend, n, t, size_), seconds_since(t0));
}

void MpiComm::recv(void* buf, int64_t n, DType t, int64_t peer) {
  const auto t0 = Clock::now();
  const int count = mpi_count(n, group(), "recv");
  MPI_Status status;
  MPI_CHECK(MPI_Recv(buf, count, move_type(t), static_cast<int>(peer), kTag, comm_, &status),
            describe("receiving", n, t, group()) + " from peer " + std::to_string(peer));
  int got = 0;
  MPI_CHECK(MPI_Get_count(&status, move_type(t), &got), "counting a received message");
  if (got != count)
    throw std::runtime_error("recv on '" + group() + "': expected " + std::to_string(count) + " elements from peer " +
                             std::to_string(peer) + ", got " + std::to_string(got));
  book(CommKind::kRecv, comm_call_bytes(CommKind::kRecv, n, t, size_), seconds_since(t0));
}

// ---- nonblocking collectives ----

// One MPI request in flight. `staging` holds the fp32 copy of a 16-bit
// operand (input and output of the reduction), converted back into `result`
// when the request completes. The seconds booked are those spent in the start
// call and in test()/wait(): the exposed time.
class MpiRequest final : public CommRequest {
 public:
  MpiRequest(MpiComm& comm, CommKind kind, int64_t bytes, std::string what)
      : comm_(comm), kind_(kind), bytes_(bytes), what_(std::move(what)) {}
  ~MpiRequest() override {
    if (done_) return;
    try {
      wait();
    } catch (...) {
      // A destructor must not throw; the error was in a request nobody waited for.
    }
  }
  MPI_Request* handle() { return &requests_[0]; }
  // A send (kind kSend, handle()) and a receive (recv_handle()) started
  // together: at completion the received count is checked, as recv checks it,
  // and a send and a recv are booked, each with half the exposed seconds.
  MPI_Request* recv_handle() { return &requests_[1]; }
  void set_recv(int64_t recv_bytes, int recv_count, MPI_Datatype type) {
    pair_ = true;
    recv_bytes_ = recv_bytes;
    recv_count_ = recv_count;
    recv_type_ = type;
  }
  // The result is staging[result_at, result_at + n), converted into `result` (n of t).
  void set_staging(std::vector<float> staging, int64_t result_at, void* result, DType t, int64_t n) {
    staging_ = std::move(staging);
    result_at_ = result_at;
    result_ = result;
    result_type_ = t;
    result_elems_ = n;
  }
  std::vector<float>& staging() { return staging_; }
  void add_seconds(double s) { seconds_ += s; }

  void wait() override {
    if (done_) return;
    const auto t0 = Clock::now();
    MPI_Status status[2];
    MPI_CHECK(MPI_Waitall(pair_ ? 2 : 1, requests_, status), "waiting for " + what_);
    complete(status[1], seconds_since(t0));
  }
  bool test() override {
    if (done_) return true;
    const auto t0 = Clock::now();
    int flag = 0;
    MPI_Status status[2];
    MPI_CHECK(MPI_Testall(pair_ ? 2 : 1, requests_, &flag, status), "testing " + what_);
    if (flag != 0)
      complete(status[1], seconds_since(t0));
    else
      seconds_ += seconds_since(t0);
    return done_;
  }

 private:
  void complete(const MPI_Status& recv_status, double wait_seconds) {
    const auto t0 = Clock::now();
    if (result_ != nullptr) convert_from_fp32(staging_.data() + result_at_, result_, result_type_, result_elems_);
    done_ = true;
    const double seconds = seconds_ + wait_seconds + seconds_since(t0);
    if (!pair_) {
      comm_.book_completed(kind_, bytes_, seconds);
      return;
    }
    int got = 0;
    MPI_CHECK(MPI_Get_count(&recv_status, recv_type_, &got), "counting the message received by " + what_);
    if (got != recv_count_)
      throw std::runtime_error(what_ + ": expected " + std::to_string(recv_count_) + " elements, got " +
                               std::to_string(got));
    comm_.book_completed(kind_, bytes_, seconds / 2);
    comm_.book_completed(CommKind::kRecv, recv_bytes_, seconds / 2);
  }

  MpiComm& comm_;
  CommKind kind_;
  int64_t bytes_;
  std::string what_;
  MPI_Request requests_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  bool pair_ = false;
  int64_t recv_bytes_ = 0;
  int recv_count_ = 0;
  MPI_Datatype recv_type_ = MPI_BYTE;
  std::vector<float> staging_;
  int64_t result_at_ = 0;
  void* result_ = nullptr;
  DType result_type_ = DType::kFP32;
  int64_t result_elems_ = 0;
  double seconds_ = 0;
  bool done_ = false;
};

CommHandle MpiComm::all_reduce_start(void* buf, int64_t n, DType t, ReduceOp op) {
  const auto t0 = Clock::now();
  const int count = mpi_count(n, group(), "all_reduce");
  const std::string what = describe("all-reducing (nonblocking)", n, t, group());
  auto req = std::make_unique<MpiRequest>(*this, CommKind::kAllReduce,
                                          comm_call_bytes(CommKind::kAllReduce, n, t, size_), what);
  if (t == DType::kFP32) {
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, mpi_op(op), comm_, req->handle()), what);
  } else {
    std::vector<float> staging(static_cast<size_t>(n));
    convert_to_fp32(buf, t, staging.data(), n);
    req->set_staging(std::move(staging), 0, buf, t, n);
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, req->staging().data(), count, MPI_FLOAT, mpi_op(op), comm_, req->handle()),
              what);
  }
  req->add_seconds(seconds_since(t0));
  return req;
}

CommHandle MpiComm::all_gather_start(void* out, const void* in, int64_t n, DType t) {
  const auto t0 = Clock::now();
  const int count = mpi_count(n, group(), "all_gather");
  mpi_count(n * size_, group(), "all_gather (output)");
  const std::string what = describe("all-gathering (nonblocking)", n, t, group());
  auto req = std::make_unique<MpiRequest>(*this, CommKind::kAllGather,
                                          comm_call_bytes(CommKind::kAllGather, n, t, size_), what);
  const void* send = in;
  if (in == static_cast<const char*>(out) + rank_ * n * dtype_bytes(t)) send = MPI_IN_PLACE;
  MPI_CHECK(MPI_Iallgather(send, count, move_type(t), out, count, move_type(t), comm_, req->handle()), what);
  req->add_seconds(seconds_since(t0));
  return req;
}

CommHandle MpiComm::reduce_scatter_start(void* out, const void* in, int64_t n, DType t) {
  const auto t0 = Clock::now();
  const int count = mpi_count(n, group(), "reduce_scatter");
  const int64_t total = n * size_;
  mpi_count(total, group(), "reduce_scatter (input)");
  const std::string what = describe("reduce-scattering (nonblocking)", n, t, group());
  auto req = std::make_unique<MpiRequest>(*this, CommKind::kReduceScatter,
                                          comm_call_bytes(CommKind::kReduceScatter, n, t, size_), what);
  if (t == DType::kFP32) {
    const void* send = in == out ? MPI_IN_PLACE : in;
    MPI_CHECK(MPI_Ireduce_scatter_block(send, out, count, MPI_FLOAT, MPI_SUM, comm_, req->handle()), what);
  } else {
    // staging = [input (n·size) | output (n)], fp32; the output converted back at completion
    std::vector<float> staging(static_cast<size_t>(total + n));
    convert_to_fp32(in, t, staging.data(), total);
    req->set_staging(std::move(staging), total, out, t, n);
    float* st = req->staging().data();
    MPI_CHECK(MPI_Ireduce_scatter_block(st, st + total, count, MPI_FLOAT, MPI_SUM, comm_, req->handle()), what);
  }
  req->add_seconds(seconds_since(t0));
  return req;
}

CommHandle MpiComm::send_recv_start(const void* send, int64_t n_send, int64_t to, void* recv, int64_t n_recv,
                                    int64_t from, DType t) {
  const auto t0 = Clock::now();
  const int send_count = mpi_count(n_send, group(), "send");
  const int recv_count = mpi_count(n_recv, group(), "recv");
  const std::string what = describe("sending (nonblocking)", n_send, t, group()) + " to peer " + std::to_string(to) +
                           " and receiving " + std::to_string(n_recv) + " from peer " + std::to_string(from);
  auto req =
      std::make_unique<MpiRequest>(*this, CommKind::kSend, comm_call_bytes(CommKind::kSend, n_send, t, size_), what);
  req->set_recv(comm_call_bytes(CommKind::kRecv, n_recv, t, size_), recv_count, move_type(t));
  // The receive first: its buffer is ready before the peer's message can arrive.
  MPI_CHECK(MPI_Irecv(recv, recv_count, move_type(t), static_cast<int>(from), kTag, comm_, req->recv_handle()), what);
  MPI_CHECK(MPI_Isend(send, send_count, move_type(t), static_cast<int>(to), kTag, comm_, req->handle()), what);
  req->add_seconds(seconds_since(t0));
  return req;
}

void MpiComm::barrier() { MPI_CHECK(MPI_Barrier(comm_), "in a barrier over '" + group() + "'"); }

std::unique_ptr<MpiComm> split_world_comm(std::string group, CommCounters& counters,
                                          const std::vector<int64_t>& members) {
  int world_rank = 0;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank), "reading the world rank");
  int color = MPI_UNDEFINED, key = 0;
  if (!members.empty()) {
    auto it = std::find(members.begin(), members.end(), static_cast<int64_t>(world_rank));
    if (it == members.end())
      throw std::invalid_argument("split_world_comm('" + group + "'): world rank " + std::to_string(world_rank) +
                                  " is not in its own group");
    // The groups do not overlap, so the first member names the group uniquely.
    color = static_cast<int>(members.front());
    key = static_cast<int>(it - members.begin());
  }
  MPI_Comm sub = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, color, key, &sub),
            "splitting MPI_COMM_WORLD into the '" + group + "' groups");
  if (members.empty()) return nullptr;
  auto comm = std::make_unique<MpiComm>(std::move(group), counters, sub);
  if (comm->size() != static_cast<int64_t>(members.size()) || comm->rank() != key)
    throw std::logic_error("split_world_comm('" + comm->group() + "'): got " + std::to_string(comm->size()) +
                           " ranks (this one " + std::to_string(comm->rank()) + "), expected " +
                           std::to_string(members.size()) + " (this one " + std::to_string(key) +
                           "): the ranks passed overlapping groups");
  return comm;
}

}  // namespace gpuledger
