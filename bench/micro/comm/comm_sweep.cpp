// Collective sweeps (see comm_sweep.h).
//
// Data check: rank r's input element i is v(r, i) = r + 1 + (i mod 7), small
// integers, so that every sum of up to a few dozen ranks is exact in fp32 and
// bf16 alike; the expected outputs are formed on the host from the same rule.
#include "bench/micro/comm/comm_sweep.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <vector>

#include "comm/comm_bytes.h"
#include "comm/mpi_check.h"
#include "comm/mpi_comm.h"
#include "comm/mpi_runtime.h"
#include "core/collective.h"
#include "kernels/registry/registry.h"
#if GPULEDGER_HAVE_NCCL
#include "comm/make_nccl_comm.h"
#endif

namespace gpuledger::micro {

namespace {

int64_t g_total_wrong = 0;

float value(int64_t rank, int64_t i) { return static_cast<float>(rank + 1 + i % 7); }

// Host values -> device buffer in t.
void upload(Device& dev, void* dst, const std::vector<float>& host, DType t) {
  if (t == DType::kFP32) {
    dev.copy_from_host(dst, host.data(), static_cast<int64_t>(host.size()) * 4);
    return;
  }
  std::vector<uint16_t> h16(host.size());
  convert_from_fp32(host.data(), h16.data(), t, static_cast<int64_t>(host.size()));
  dev.copy_from_host(dst, h16.data(), static_cast<int64_t>(host.size()) * 2);
}

std::vector<float> download(Device& dev, const void* src, int64_t n, DType t) {
  std::vector<float> host(static_cast<size_t>(n));
  if (t == DType::kFP32) {
    dev.copy_to_host(host.data(), src, n * 4);
  } else {
    std::vector<uint16_t> h16(static_cast<size_t>(n));
    dev.copy_to_host(h16.data(), src, n * 2);
    convert_to_fp32(h16.data(), t, host.data(), n);
  }
  return host;
}

CommKind booked_kind(Collective c) {
  switch (c) {
    case Collective::kAllReduce: return CommKind::kAllReduce;
    case Collective::kAllGather: return CommKind::kAllGather;
    case Collective::kReduceScatter: return CommKind::kReduceScatter;
    case Collective::kBroadcast: return CommKind::kBroadcast;
    case Collective::kSendRecv: return CommKind::kSend;
  }
  return CommKind::kSend;
}

// Elements per rank for a size in nccl-tests' sense: all-gather's output and
// reduce-scatter's input are size bytes in all, the others one buffer of size.
int64_t per_rank_count(Collective c, int64_t bytes, DType t, int64_t ranks) {
  const int64_t elems = bytes / dtype_bytes(t);
  const int64_t n = (c == Collective::kAllGather || c == Collective::kReduceScatter) ? elems / ranks : elems;
  return std::max<int64_t>(n, 1);
}

// The buffers of one call and how to issue it.
struct Call {
  Buffer a, b;  // a: the input (or the one buffer); b: the output when separate
  void* in = nullptr;
  void* out = nullptr;
  int64_t n = 0, in_elems = 0, out_elems = 0;
};

Call make_call(CommRig& rig, const SweepPoint& p, int64_t n) {
  Device& dev = *rig.dev;
  const int64_t ranks = rig.comm->size(), rank = rig.comm->rank(), e = dtype_bytes(p.t);
  Call c;
  c.n = n;
  switch (p.kind) {
    case Collective::kAllReduce:
    case Collective::kBroadcast:
      c.a = dev.alloc(n * e, Account::kComm, "micro.comm.buf");
      c.in = c.out = c.a.data();
      c.in_elems = c.out_elems = n;
      break;
    case Collective::kAllGather:
      c.b = dev.alloc(n * ranks * e, Account::kComm, "micro.comm.out");
      c.out = c.b.data();
      if (p.in_place) {
        c.in = static_cast<char*>(c.out) + rank * n * e;
      } else {
        c.a = dev.alloc(n * e, Account::kComm, "micro.comm.in");
        c.in = c.a.data();
      }
      c.in_elems = n;
      c.out_elems = n * ranks;
      break;
    case Collective::kReduceScatter:
      c.a = dev.alloc(n * ranks * e, Account::kComm, "micro.comm.in");
      c.in = c.a.data();
      if (p.in_place) {
        c.out = c.in;  // Comm's in-place form: the slice lands at the start of the input
      } else {
        c.b = dev.alloc(n * e, Account::kComm, "micro.comm.out");
        c.out = c.b.data();
      }
      c.in_elems = n * ranks;
      c.out_elems = n;
      break;
    case Collective::kSendRecv:
      c.a = dev.alloc(n * e, Account::kComm, "micro.comm.send");
      c.b = dev.alloc(n * e, Account::kComm, "micro.comm.recv");
      c.in = c.a.data();
      c.out = c.b.data();
      c.in_elems = c.out_elems = n;
      break;
  }
  return c;
}

// Pairs (0, 1), (2, 3), …: the even rank sends, the odd one receives; a last
// odd-numbered rank out (world size odd) idles.
void issue(Comm& comm, const SweepPoint& p, Call& c) {
  const int64_t rank = comm.rank(), ranks = comm.size();
  switch (p.kind) {
    case Collective::kAllReduce: comm.all_reduce(c.in, c.n, p.t); break;
    case Collective::kAllGather: comm.all_gather(c.out, c.in, c.n, p.t); break;
    case Collective::kReduceScatter: comm.reduce_scatter(c.out, c.in, c.n, p.t); break;
    case Collective::kBroadcast: comm.broadcast(c.in, c.n, p.t, 0); break;
    case Collective::kSendRecv:
      if (rank % 2 == 0 && rank + 1 < ranks)
        comm.send(c.in, c.n, p.t, rank + 1);
      else if (rank % 2 == 1)
        comm.recv(c.out, c.n, p.t, rank - 1);
      break;
  }
}

// Fresh inputs, one call, the outputs compared with the rule; wrong elements on this rank.
int64_t check(CommRig& rig, const SweepPoint& p, Call& c) {
  Device& dev = *rig.dev;
  const int64_t rank = rig.comm->rank(), ranks = rig.comm->size(), n = c.n;
  std::vector<float> in(static_cast<size_t>(c.in_elems));
  for (int64_t i = 0; i < c.in_elems; ++i) in[i] = value(rank, i);
  upload(dev, c.in, in, p.t);
  std::vector<float> want;
  switch (p.kind) {
    case Collective::kAllReduce:
      want.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        float s = 0;
        for (int64_t r = 0; r < ranks; ++r) s += value(r, i);
        want[i] = s;
      }
      break;
    case Collective::kAllGather:
      want.resize(static_cast<size_t>(n * ranks));
      for (int64_t r = 0; r < ranks; ++r)
        for (int64_t i = 0; i < n; ++i) want[r * n + i] = value(r, i);
      break;
    case Collective::kReduceScatter:
      want.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        float s = 0;
        for (int64_t r = 0; r < ranks; ++r) s += value(r, rank * n + i);
        want[i] = s;
      }
      break;
    case Collective::kBroadcast:
      want.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) want[i] = value(0, i);
      break;
    case Collective::kSendRecv:
      if (rank % 2 == 1) {
        want.resize(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) want[i] = value(rank - 1, i);
      }
      break;
  }
  issue(*rig.comm, p, c);
  dev.synchronize();
  if (want.empty()) return 0;  // a sender has nothing to compare
  const std::vector<float> got = download(dev, c.out, static_cast<int64_t>(want.size()), p.t);
  int64_t wrong = 0;
  for (size_t i = 0; i < want.size(); ++i) wrong += got[i] != want[i];
  return wrong;
}

}  // namespace

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::kAllReduce: return "all_reduce";
    case Collective::kAllGather: return "all_gather";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kSendRecv: return "send_recv";
  }
  return "?";
}

bool collective_from_name(const std::string& name, Collective* c) {
  for (Collective k : {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter,
                       Collective::kBroadcast, Collective::kSendRecv})
    if (name == collective_name(k)) {
      *c = k;
      return true;
    }
  return false;
}

bool has_placement(Collective c, bool in_place) {
  if (c == Collective::kAllReduce || c == Collective::kBroadcast) return in_place;
  if (c == Collective::kSendRecv) return !in_place;
  return true;
}

std::unique_ptr<CommRig> make_comm_rig(const std::string& backend, std::string* why) {
  auto rig = std::make_unique<CommRig>();
  rig->backend = backend;
  std::string error;
  try {
    if (backend == "mpi") {
      rig->dev = make_device("cpu", rig->ledger);
      rig->comm = std::make_unique<MpiComm>("world", rig->counters, MPI_COMM_WORLD);
    } else if (backend == "nccl") {
#if GPULEDGER_HAVE_NCCL
      MpiRuntime mpi;  // MPI is up already: this one only reads the rank's place on its node (core/local_rank.h)
      rig->dev = make_device("cuda", rig->ledger, static_cast<int>(mpi.local_rank()));
#else
      throw std::invalid_argument("nccl: not built (needs CUDA, MPI and NCCL at configure time)");
#endif
    } else {
      throw std::invalid_argument("unknown comm backend '" + backend + "' (mpi, nccl)");
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  // Every rank must agree before any collective of this backend is registered.
  int ok = error.empty() ? 1 : 0, all_ok = 0;
  MPI_CHECK(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD),
            "agreeing whether comm backend '" + backend + "' exists on every rank");
  if (!all_ok) {
    *why = error.empty() ? "unavailable on another rank" : error;
    return nullptr;
  }
#if GPULEDGER_HAVE_NCCL
  if (backend == "nccl") {
    MPI_Comm dup = MPI_COMM_NULL;
    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &dup), "duplicating the world for the NCCL bootstrap");
    rig->comm = make_nccl_comm(std::make_unique<MpiComm>("world", rig->counters, dup), rig->counters, *rig->dev);
  }
#endif
  return rig;
}

void run_collective(benchmark::State& st, CommRig& rig, const SweepPoint& p) {
  Comm& comm = *rig.comm;
  Device& dev = *rig.dev;
  const int64_t ranks = comm.size();
  const int64_t n = per_rank_count(p.kind, st.range(0), p.t, ranks);
  Call c = make_call(rig, p, n);
  std::vector<float> init(static_cast<size_t>(c.in_elems));
  for (int64_t i = 0; i < c.in_elems; ++i) init[i] = value(comm.rank(), i);
  upload(dev, c.in, init, p.t);
  for (int64_t i = 0; i < p.warmup_iters; ++i) issue(comm, p, c);
  dev.synchronize();
  comm.barrier();
  double total_s = 0;
  for (auto _ : st) {
    const auto t0 = std::chrono::steady_clock::now();
    issue(comm, p, c);
    dev.synchronize();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // The iteration takes as long as its slowest rank (nccl-tests reports the max over ranks).
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
              std::string("taking the max over ranks of a ") + collective_name(p.kind) + " time");
    st.SetIterationTime(s);
    total_s += s;
  }
  long long wrong = check(rig, p, c);
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD),
            std::string("summing the wrong elements of a ") + collective_name(p.kind) + " check");
  g_total_wrong += wrong;
  const CommKind kind = booked_kind(p.kind);
  const double bytes = static_cast<double>(comm_call_bytes(kind, n, p.t, ranks));
  const double algbw = total_s > 0 ? bytes * static_cast<double>(st.iterations()) / total_s : 0;
  // nccl-tests: send/recv has factor 1 (each byte crosses the link once).
  const double factor = busbw_factor(kind, ranks);
  st.counters["bytes"] = bytes;
  st.counters["algbw"] = algbw;
  st.counters["busbw"] = algbw * factor;
  st.counters["wrong"] = static_cast<double>(wrong);
}

int64_t total_wrong() { return g_total_wrong; }

}  // namespace gpuledger::micro
