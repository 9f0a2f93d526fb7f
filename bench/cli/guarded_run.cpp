// Failures → exit statuses (see guarded_run.h).
#include "bench/cli/guarded_run.h"

#include <CLI/CLI.hpp>

#include <stdexcept>

#include "bench/exit_codes.h"
#include "core/checked_math.h"
#include "core/layout.h"
#include "core/model_config.h"

namespace gpuledger::cli {

GuardedRun run_guarded(const std::function<int()>& run) {
  GuardedRun g;
  auto failed = [&](int exit, const char* what) {
    g.exit = exit;
    g.threw = true;
    g.error = what;
  };
  try {
    g.exit = run();
  } catch (const CLI::ParseError& e) {
    failed(kExitUsage, e.what());
  } catch (const ConfigError& e) {
    failed(kExitUsage, e.what());
  } catch (const LayoutError& e) {
    failed(kExitUsage, e.what());
  } catch (const std::invalid_argument& e) {
    failed(kExitUsage, e.what());
  } catch (const OverflowError& e) {
    // A budget that does not fit in 64 bits: the configuration asks for too much.
    failed(kExitUsage, e.what());
  } catch (const std::exception& e) {
    failed(kExitFailed, e.what());
  }
  return g;
}

}  // namespace gpuledger::cli
