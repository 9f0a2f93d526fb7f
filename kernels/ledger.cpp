// Ledger: booking and unbooking bytes by account, the per-account and total
// peaks, the breakdown at the moment of the total's peak, and phase markers.
// Plain host arithmetic; the Device calls book() before it allocates and
// unbook() after it frees (kernels/device.cpp).
#include "kernels/ledger.h"

#include <algorithm>
#include <string>

namespace gpuledger {

namespace {

std::string oom_message(Account account, int64_t bytes, const std::string& what, int64_t live, int64_t limit) {
  std::string msg = "allocating " + std::to_string(bytes) + " bytes for ";
  msg += what.empty() ? std::string("an unnamed buffer") : what;
  msg += " (" + std::string(account_name(account)) + ")";
  msg += " would exceed the memory limit " + std::to_string(limit) + ": live " + std::to_string(live);
  return msg;
}

}  // namespace

void Ledger::book(Account account, int64_t bytes, const std::string& what) {
  if (bytes < 0)
    throw std::invalid_argument("Ledger::book: negative size " + std::to_string(bytes) + " for " +
                                (what.empty() ? std::string("an unnamed buffer") : what));
  // Host memory is no part of the device's: it is booked per account, but the
  // device total, its peak and the limit (device capacity) never see it.
  const bool device = is_device_account(account);
  // Check before touching anything, so a refused request books nothing.
  if (device && limit_ && live_total_ + bytes > *limit_) {
    record_failure(account, bytes, what);
    throw OutOfMemory(oom_message(account, bytes, what, live_total_, *limit_), account, bytes, live_total_, limit_);
  }

  live_[account] += bytes;
  count_[account] += 1;
  peak_[account] = std::max(peak_[account], live_[account]);
  if (!device) return;
  live_total_ += bytes;
  // The breakdown is taken only when the total strictly exceeds its previous
  // peak: the first moment a peak is reached is the one reported.
  if (live_total_ > peak_total_) {
    peak_total_ = live_total_;
    at_peak_ = live_;
  }
  peak_since_mark_ = std::max(peak_since_mark_, live_total_);
  if (events_on_) events_.push_back({account, bytes, true});
}

void Ledger::record_failure(Account account, int64_t bytes, const std::string& what) {
  // Kept because the unwinding that follows frees everything: a failed point's
  // report must show the ledger as it stood when the allocation was refused.
  if (failure_) return;  // the first refusal is the one that ended the run
  LedgerFailure f;
  f.live = live_;
  f.account = account;
  f.requested_bytes = bytes;
  f.what = what;
  failure_ = f;
}

void Ledger::unbook(Account account, int64_t bytes) {
  // Unbooking more than is live means a buffer was freed twice or through the
  // wrong account: a bug in the caller, never a condition to paper over.
  if (bytes < 0 || bytes > live_[account])
    throw std::logic_error("Ledger::unbook: " + std::to_string(bytes) + " bytes from " +
                           std::string(account_name(account)) + " which has " + std::to_string(live_[account]) +
                           " live");
  live_[account] -= bytes;
  if (!is_device_account(account)) return;
  live_total_ -= bytes;
  if (events_on_) events_.push_back({account, bytes, false});
}

void Ledger::reset_peaks() {
  peak_ = live_;
  at_peak_ = live_;
  peak_total_ = live_total_;
  peak_since_mark_ = live_total_;
}

void Ledger::mark_phase(const std::string& phase) {
  if (timeline_on_) timeline_.push_back(PhaseSample{phase, live_, peak_since_mark_});
  // The next sample's peak counts from now, whether or not this one was kept.
  peak_since_mark_ = live_total_;
}

}  // namespace gpuledger
