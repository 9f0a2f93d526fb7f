// A Ledger's figures as a run record keeps them: what the report writes under
// a rank's "measured" (bench/report/ledger_json.h), read off when the run ends.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "kernels/ledger.h"
#include "kernels/torch_caching_allocator.h"

namespace gpuledger::bench {

struct LedgerRecord {
  int64_t peak_bytes = 0;
  AccountBytes at_peak, peak_by_account, live_by_account, alloc_count;
  std::optional<int64_t> limit_bytes;
  std::optional<LedgerFailure> failure;  // the first refused allocation
  bool with_timeline = false;
  std::vector<PhaseSample> timeline;  // one sample per phase marker, when recorded
  // The run's allocations replayed through PyTorch's caching allocator, when
  // the ledger recorded its events: what memory_reserved() would show.
  std::optional<TorchMemoryReplay> torch;
};

// `cublas_workspace_bytes`: PyTorch's for the device (core/device_spec.h),
// replayed first when the ledger recorded its events.
inline LedgerRecord ledger_record(const Ledger& l, bool with_timeline, int64_t cublas_workspace_bytes = 0) {
  LedgerRecord r;
  r.peak_bytes = l.peak_total();
  r.at_peak = l.at_peak();
  r.peak_by_account = l.peak_by_account();
  r.live_by_account = l.live_by_account();
  for (Account a : kAllAccounts) r.alloc_count[a] = l.count(a);
  r.limit_bytes = l.limit();
  r.failure = l.failure();
  r.with_timeline = with_timeline;
  if (with_timeline) r.timeline = l.timeline();
  if (l.events_enabled()) r.torch = replay_torch_caching_allocator(l.events(), cublas_workspace_bytes);
  return r;
}

}  // namespace gpuledger::bench
