// Ledger: the rank's memory book (a tracking allocator's accounting half).
// Per account: live bytes, peak bytes, allocation count; for the rank: the peak
// of the device total and the breakdown by account at that moment (the sum of
// per-account peaks is not the peak of the sum); phase markers for a timeline.
// The `host` account (host memory held for the rank) has its live bytes and
// peak like any other, but is outside the device total, its peak and the limit.
// Host-only, no CUDA, and it never includes analytic/ (docs/architecture.md "Independence": the
// measured side never reads the analytic side).
#pragma once
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/account.h"

namespace gpuledger {

// Thrown when an allocation would exceed the limit (--memory-limit, or the
// device's own allocation failure). Carries the request and the ledger state.
class OutOfMemory : public std::runtime_error {
 public:
  OutOfMemory(const std::string& msg, Account account, int64_t requested_bytes, int64_t live_bytes,
              std::optional<int64_t> limit_bytes)
      : std::runtime_error(msg),
        account(account),
        requested_bytes(requested_bytes),
        live_bytes(live_bytes),
        limit_bytes(limit_bytes) {}
  Account account;
  int64_t requested_bytes;
  int64_t live_bytes;
  std::optional<int64_t> limit_bytes;
};

// One phase marker: the live bytes when a phase began, and the peak of the
// total seen since the previous marker.
struct PhaseSample {
  std::string phase;  // "fwd.layer.3", "bwd.layer.3", "optimizer", ...
  AccountBytes live;  // live bytes by account at the marker
  int64_t peak_since_prev = 0;
};

// The ledger as it stood when an allocation was refused (the first refusal).
struct LedgerFailure {
  AccountBytes live;
  Account account = Account::kWorkspace;
  int64_t requested_bytes = 0;
  std::string what;
};

// One booking or unbooking, in order (recorded when enabled): what a model
// of another allocator replays (kernels/torch_caching_allocator.h).
struct LedgerEvent {
  Account account = Account::kWorkspace;
  int64_t bytes = 0;
  bool alloc = true;  // false: a free
};

class Ledger {
 public:
  explicit Ledger(std::optional<int64_t> limit_bytes = std::nullopt) : limit_(limit_bytes) {}

  // Books `bytes` under `account`; throws OutOfMemory (booking nothing) when the
  // live device total would exceed the limit (a `host` booking never does). `what` names the tensor in messages.
  void book(Account account, int64_t bytes, const std::string& what = {});
  void unbook(Account account, int64_t bytes);

  int64_t live(Account a) const { return live_[a]; }
  int64_t peak(Account a) const { return peak_[a]; }
  int64_t count(Account a) const { return count_[a]; }
  int64_t live_total() const { return live_total_; }  // device accounts only (not `host`)
  int64_t peak_total() const { return peak_total_; }  // device accounts only (not `host`)
  const AccountBytes& live_by_account() const { return live_; }
  const AccountBytes& peak_by_account() const { return peak_; }
  const AccountBytes& at_peak() const { return at_peak_; }  // breakdown when peak_total was reached
  std::optional<int64_t> limit() const { return limit_; }

  // Set when book() refused an allocation (kept through the unwinding that follows);
  // a device's own allocation failure is recorded the same way (Device::alloc).
  const std::optional<LedgerFailure>& failure() const { return failure_; }
  void record_failure(Account account, int64_t bytes, const std::string& what);

  // Starts a new measurement window: peaks restart from the live bytes.
  void reset_peaks();

  // Phase markers for memory over time. Recording is off unless enabled (a
  // long run would otherwise keep thousands of samples).
  void enable_timeline(bool on) { timeline_on_ = on; }
  void mark_phase(const std::string& phase);
  const std::vector<PhaseSample>& timeline() const { return timeline_; }

  // The ordered list of device bookings and unbookings (`host` is not the
  // device allocator's), off unless enabled.
  void enable_events(bool on) { events_on_ = on; }
  bool events_enabled() const { return events_on_; }
  const std::vector<LedgerEvent>& events() const { return events_; }

 private:
  std::optional<int64_t> limit_;
  AccountBytes live_, peak_, count_, at_peak_;
  int64_t live_total_ = 0, peak_total_ = 0, peak_since_mark_ = 0;
  bool timeline_on_ = false;
  std::vector<PhaseSample> timeline_;
  bool events_on_ = false;
  std::vector<LedgerEvent> events_;
  std::optional<LedgerFailure> failure_;
};

}  // namespace gpuledger
