// A subcommand's run with its failures mapped to exit statuses, as the binary
// reports them (bench/exit_codes.h): a usage error (ConfigError, LayoutError,
// std::invalid_argument, a CLI11 parse error) is 2, any other exception 1.
#pragma once
#include <functional>
#include <string>

namespace gpuledger::cli {

struct GuardedRun {
  int exit = 0;
  bool threw = false;  // the exit status comes from an exception, whose message is `error`
  std::string error;
};

GuardedRun run_guarded(const std::function<int()>& run);

}  // namespace gpuledger::cli
