// The backend-independent half of the Device: the owning Buffer handle, and
// alloc/release, which keep the ledger and the backend's memory in step
// (book first, then allocate; free, then unbook). Also AttnShape::scale and
// the default timer (the host's clock around synchronize()).
#include "kernels/device.h"

#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

namespace gpuledger {

// ---- Buffer ----

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    reset();
    device_ = std::exchange(o.device_, nullptr);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    account_ = o.account_;
  }
  return *this;
}

void Buffer::reset() {
  if (device_ == nullptr) return;
  device_->release(*this);
  device_ = nullptr;
  ptr_ = nullptr;
  bytes_ = 0;
}

// ---- Device memory ----

Buffer Device::alloc(int64_t bytes, Account account, const std::string& what) {
  if (bytes < 0)
    throw std::invalid_argument("Device::alloc: negative size " + std::to_string(bytes) + " for " +
                                (what.empty() ? std::string("an unnamed buffer") : what));
  // The ledger decides first: over the limit nothing is allocated.
  ledger_.book(account, bytes, what);

  void* p = nullptr;
  if (touches_memory()) {
    p = account == Account::kHost ? raw_alloc_host(bytes) : raw_alloc(bytes);
    if (p == nullptr) {
      ledger_.unbook(account, bytes);
      ledger_.record_failure(account, bytes, what);
      const int64_t live = ledger_.live_total();
      throw OutOfMemory(
          name() + (account == Account::kHost ? ": the host could not allocate " : ": the device could not allocate ") +
              std::to_string(bytes) + " bytes for " + (what.empty() ? std::string("an unnamed buffer") : what) + " (" +
              std::string(account_name(account)) + "): live " + std::to_string(live),
          account, bytes, live, ledger_.limit());
    }
  }
  // On meta (touches_memory() false) the handle owns bookings only: data()
  // stays nullptr, yet the Buffer is non-empty and unbooks when released.
  Buffer b;
  b.device_ = this;
  b.ptr_ = p;
  b.bytes_ = bytes;
  b.account_ = account;
  return b;
}

void Device::release(Buffer& b) {
  if (b.ptr_ != nullptr) {
    if (b.account_ == Account::kHost)
      raw_free_host(b.ptr_, b.bytes_);
    else
      raw_free(b.ptr_, b.bytes_);
  }
  ledger_.unbook(b.account_, b.bytes_);
}

// ---- timing ----

namespace {

// Host time between two synchronize() calls: on a synchronous backend (cpu,
// meta) the op's own time; on an asynchronous one it includes the launches
// and the wait, which is why CudaDevice overrides start_timer with events.
class HostClockTimer final : public DeviceTimer {
 public:
  explicit HostClockTimer(Device& d) : device_(d) {
    device_.synchronize();  // earlier work is not this timer's
    t0_ = std::chrono::steady_clock::now();
  }
  double stop_seconds() override {
    device_.synchronize();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }

 private:
  Device& device_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace

std::unique_ptr<DeviceTimer> Device::start_timer() { return std::make_unique<HostClockTimer>(*this); }

// ---- AttnShape ----

// 1/sqrt(D) (Vaswani et al. 2017, Eq. 1), rounded once from double so every
// backend gets the same float.
float AttnShape::scale() const { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(D))); }

}  // namespace gpuledger
