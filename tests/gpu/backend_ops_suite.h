// The backend-vs-CPU op suite (ggml's test-backend-ops idea): every op of the
// Device table, for a few shapes and dtypes, run on the backend under test and
// on the CPU reference with the same inputs, forward and backward, compared by
// normalized mean squared error against a per-dtype tolerance; bytes that must
// match exactly (dropout masks, layout moves) compared byte for byte; FLOP
// counters compared to the FLOP.
//
// The suite (backend_ops_suite.cpp) is linked into two binaries that choose the
// backend before running it: test_backend_ops (the CUDA backend; exits 77 =
// skipped when there is no GPU) and test_simt_emulated (the same CUDA kernels
// on the CPU emulator, kernels/cuda/simt_emu.h; runs everywhere).
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "kernels/device.h"

namespace gpuledger::backend_test {

struct BackendUnderTest {
  std::string name;
  std::function<std::unique_ptr<Device>(Ledger&)> make;
  bool own_gemm = true;  // false: its GEMM is the CPU's (the emulator): nothing to compare
};

// Call before RUN_ALL_TESTS.
void set_backend_under_test(BackendUnderTest b);
// The backend set above (for the suites linked beside this one: training_step_suite.cpp).
BackendUnderTest& backend();

}  // namespace gpuledger::backend_test
