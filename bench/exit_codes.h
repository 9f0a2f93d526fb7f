// Exit statuses of the gpuledger binary (docs/architecture.md "Command line").
#pragma once

namespace gpuledger::cli {
inline constexpr int kExitOk = 0;      // ran, every check passed
inline constexpr int kExitFailed = 1;  // a check or regression failed, or the run failed (OOM, error)
inline constexpr int kExitUsage = 2;   // bad option, bad config, a layout that does not divide
}  // namespace gpuledger::cli
