// Waits for DP gradient reductions moved to the reducer's finish (see grad_buffer.h).
#include "perf/sim/grad_buffer.h"

#include <cstdint>
#include <set>
#include <string_view>

#include "core/collective.h"

namespace gpuledger::perf {
namespace {

bool is_grad_reduction(const SimEvent& start) {
  const bool dp = start.stream == comm_stream(comm_group_name(CommGroup::kDp)) ||
                  start.stream == comm_stream(comm_group_name(CommGroup::kEdp));
  return start.kind == SimEventKind::kCollectiveStart && dp &&
         (start.name == comm_kind_name(CommKind::kReduceScatter) || start.name == comm_kind_name(CommKind::kAllReduce));
}

}  // namespace

void defer_grad_reduce_waits(std::vector<SimEvent>& program) {
  std::set<int64_t> reductions;  // handles of started gradient reductions
  for (const SimEvent& e : program)
    if (is_grad_reduction(e)) reductions.insert(e.handle);
  std::vector<size_t> waits;
  for (size_t i = 0; i < program.size(); ++i)
    if (program[i].kind == SimEventKind::kCollectiveWait && reductions.count(program[i].handle)) waits.push_back(i);
  if (waits.size() < 2) return;
  const size_t last = waits.back();
  std::vector<SimEvent> moved, out;
  out.reserve(program.size());
  size_t w = 0;
  for (size_t i = 0; i < program.size(); ++i) {
    if (w < waits.size() && waits[w] == i) {
      ++w;
      if (i != last) {
        moved.push_back(program[i]);
        continue;
      }
      out.insert(out.end(), moved.begin(), moved.end());
    }
    out.push_back(program[i]);
  }
  program = std::move(out);
}

}  // namespace gpuledger::perf
