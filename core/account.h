// The accounts every byte of a run is booked under (docs/architecture.md "Accounts"):
// eight of device memory and one, `host`, of host memory held on the rank's
// behalf. Holds the enum, its names and a fixed-size per-account array; nothing else.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/checked_math.h"

namespace gpuledger {

enum class Account : int {
  kWeights = 0,  // 16-bit (or fp32) parameters used in compute, incl. ZeRO-3 gathered copies
  kGrads,        // parameter gradients (bf16 by default; fp32 with --grad-dtype fp32)
  kMaster,       // fp32 master weights (mixed precision only)
  kOptim,        // Adam m and v, fp32
  kActivations,  // tensors saved by forward for backward, per microbatch in flight
  kKv,           // inference KV cache (reserved bytes)
  kComm,         // communication staging: DP buckets, ZeRO buffers, PP send/recv buffers
  kWorkspace,    // temporaries living inside one op or one layer
  kHost,         // host (CPU) memory held for the rank: KV swap space, offloaded master and optimizer state
};

inline constexpr int kNumAccounts = 9;

inline constexpr std::array<std::string_view, kNumAccounts> kAccountNames = {
    "weights", "grads", "master", "optim", "activations", "kv", "comm", "workspace", "host"};

// Whether an account's bytes live in device memory: every account but `host`.
// Device totals, peaks, the memory limit and `fits` count these alone.
inline constexpr bool is_device_account(Account a) { return a != Account::kHost; }

inline constexpr std::string_view account_name(Account a) { return kAccountNames[static_cast<int>(a)]; }

inline std::optional<Account> account_from_name(std::string_view name) {
  for (int i = 0; i < kNumAccounts; ++i)
    if (kAccountNames[i] == name) return static_cast<Account>(i);
  return std::nullopt;
}

// Bytes per account, indexed by Account. Used by the ledger (measured) and by
// the analytic budgets (expected) alike — a plain value type, no behaviour.
struct AccountBytes {
  std::array<int64_t, kNumAccounts> bytes{};
  int64_t& operator[](Account a) { return bytes[static_cast<int>(a)]; }
  int64_t operator[](Account a) const { return bytes[static_cast<int>(a)]; }
  // Σ over the device accounts (host memory excluded): what a device must hold.
  int64_t device_total() const {
    std::array<int64_t, kNumAccounts - 1> device{};
    for (int i = 0, k = 0; i < kNumAccounts; ++i)
      if (is_device_account(static_cast<Account>(i))) device[static_cast<size_t>(k++)] = bytes[static_cast<size_t>(i)];
    return checked_sum(device, "device bytes over accounts");
  }
  int64_t host() const { return (*this)[Account::kHost]; }
};

inline constexpr std::array<Account, kNumAccounts> kAllAccounts = {
    Account::kWeights, Account::kGrads, Account::kMaster,    Account::kOptim, Account::kActivations,
    Account::kKv,      Account::kComm,  Account::kWorkspace, Account::kHost};

}  // namespace gpuledger
