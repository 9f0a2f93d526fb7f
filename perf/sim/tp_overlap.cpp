// TP collectives split into chunks beside their GEMMs (see tp_overlap.h).
#include "perf/sim/tp_overlap.h"

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

#include "core/collective.h"

namespace gpuledger::perf {
namespace {

bool on_tp_stream(const SimEvent& e) { return e.stream == comm_stream(comm_group_name(CommGroup::kTp)); }

bool is_gemm(const SimEvent& e) { return e.kind == SimEventKind::kCompute && e.name == "gemm"; }

bool is_tp_blocking(const SimEvent& e, std::string_view kind) {
  return e.kind == SimEventKind::kCollective && on_tp_stream(e) && e.name == kind;
}

// The part of collective `c` that runs on the compute stream (one chunk of tp)
// or beside it (the other tp − 1), with its wait.
struct Split {
  SimEvent chunk, start, wait;
};
Split split(const SimEvent& c, int64_t tp, int64_t handle) {
  const double n = static_cast<double>(tp);
  Split s{c, c, c};
  s.chunk.seconds = c.seconds / n;
  s.chunk.bytes = c.bytes / tp;
  s.start.kind = SimEventKind::kCollectiveStart;
  s.start.seconds = c.seconds * (n - 1) / n;
  s.start.bytes = c.bytes - s.chunk.bytes;
  s.start.handle = handle;
  s.wait.kind = SimEventKind::kCollectiveWait;
  s.wait.seconds = 0;
  s.wait.handle = handle;
  return s;
}

// The index in `out` of the GEMM event that ends it, behind the waits this
// pass put after it; -1 when the last compute-stream event is not a GEMM.
int64_t trailing_gemm(const std::vector<SimEvent>& out) {
  int64_t i = static_cast<int64_t>(out.size()) - 1;
  while (i >= 0 && out[static_cast<size_t>(i)].kind == SimEventKind::kCollectiveWait &&
         on_tp_stream(out[static_cast<size_t>(i)]))
    --i;
  return i >= 0 && is_gemm(out[static_cast<size_t>(i)]) ? i : -1;
}

}  // namespace

void overlap_tp_comm(std::vector<SimEvent>& program, int64_t tp) {
  if (tp <= 1) return;
  int64_t handle = 0;
  for (const SimEvent& e : program) handle = std::max(handle, e.handle + 1);
  std::vector<SimEvent> out;
  out.reserve(program.size() + program.size() / 2);
  size_t i = 0;
  while (i < program.size()) {
    const SimEvent& e = program[i];
    if (is_tp_blocking(e, comm_kind_name(CommKind::kAllGather))) {
      size_t j = i + 1;
      while (j < program.size() && program[j].kind == SimEventKind::kCompute && !is_gemm(program[j])) ++j;
      if (j < program.size() && is_gemm(program[j])) {
        out.insert(out.end(), program.begin() + static_cast<std::ptrdiff_t>(i + 1),
                   program.begin() + static_cast<std::ptrdiff_t>(j));
        const Split s = split(e, tp, handle++);
        out.push_back(s.chunk);
        out.push_back(s.start);
        out.push_back(program[j]);
        out.push_back(s.wait);
        i = j + 1;
        continue;
      }
    }
    if (is_tp_blocking(e, comm_kind_name(CommKind::kReduceScatter))) {
      const int64_t g = trailing_gemm(out);
      if (g >= 0) {
        const Split s = split(e, tp, handle++);
        out.insert(out.begin() + g, s.start);
        out.push_back(s.wait);
        out.push_back(s.chunk);
        ++i;
        continue;
      }
    }
    out.push_back(e);
    ++i;
  }
  program = std::move(out);
}

}  // namespace gpuledger::perf
