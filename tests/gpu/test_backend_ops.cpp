// The CUDA backend against the CPU reference, op by op (backend_ops_suite.cpp).
// Without a usable GPU it prints why and exits 77, which ctest reports as
// skipped (SKIP_RETURN_CODE, cmake/GpuledgerTesting.cmake); nothing touches
// the GPU before main, so test discovery never needs one.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <stdexcept>

#include "kernels/device.h"
#include "kernels/registry/registry.h"
#include "tests/gpu/backend_ops_suite.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  {
    gpuledger::Ledger probe;
    try {
      auto dev = gpuledger::make_device("cuda", probe);
      std::printf("backend under test: %s\n", dev->description().c_str());
    } catch (const std::invalid_argument& e) {
      std::printf("SKIPPED: %s\n", e.what());
      return 77;
    }
  }
  gpuledger::backend_test::set_backend_under_test(
      {"cuda", [](gpuledger::Ledger& l) { return gpuledger::make_device("cuda", l); },
       /*own_gemm=*/true});
  return RUN_ALL_TESTS();
}
