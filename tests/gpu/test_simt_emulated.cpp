// The CUDA backend's kernels on the CPU: kernels/cuda/ops_*.cu compiled as C++
// with GPL_SIMT_EMULATION=1 run on the SIMT emulator (kernels/cuda/simt_emu.h)
// through EmuDevice — SimtDevice's op table with host memory — and the
// backend-vs-CPU suite (backend_ops_suite.cpp) compares it with the CPU
// reference. This checks, without a GPU, everything in those kernels but the
// hardware: index arithmetic, masks, tiling, reductions, barriers (a divergent
// __syncthreads() aborts), Philox draws, rounding points. The GEMM is the one
// op it cannot cover (cuBLASLt): EmuDevice runs the CPU's.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "kernels/cpu/cpu_device.h"
#include "kernels/cuda/simt_device.cuh"
#include "tests/gpu/backend_ops_suite.h"

namespace gpuledger {
namespace {

class EmuDevice : public SimtDevice {
 public:
  explicit EmuDevice(Ledger& ledger) : SimtDevice(ledger), cpu_(cpu_ledger_) {
    max_smem_per_block_bytes_ = 227 * 1024;  // an H100/H200 block's opt-in limit
  }
  std::string name() const override { return "cuda-emulated"; }
  std::string description() const override { return "CUDA kernels on the CPU SIMT emulator"; }
  void copy_to_host(void* host_dst, const void* src, int64_t bytes) override {
    if (bytes > 0) std::memcpy(host_dst, src, static_cast<size_t>(bytes));
  }
  void copy_from_host(void* dst, const void* host_src, int64_t bytes) override {
    if (bytes > 0) std::memcpy(dst, host_src, static_cast<size_t>(bytes));
  }
  void copy(void* dst, const void* src, int64_t bytes) override {
    if (bytes > 0) std::memmove(dst, src, static_cast<size_t>(bytes));
  }
  void fill_zero(void* dst, int64_t bytes) override {
    if (bytes > 0) std::memset(dst, 0, static_cast<size_t>(bytes));
  }

 protected:
  // The CPU's GEMM (its entry point checks and counts on cpu_; this device's
  // Device::gemm counts the FLOPs here).
  void gemm_impl(const GemmArgs& g) override { cpu_.gemm(g); }
  void* raw_alloc(int64_t bytes) override {
    return std::aligned_alloc(64, static_cast<size_t>((bytes + 63) / 64 * 64 + 64));
  }
  void raw_free(void* p, int64_t) override { std::free(p); }

 private:
  Ledger cpu_ledger_;
  CpuDevice cpu_;
};

}  // namespace
}  // namespace gpuledger

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  gpuledger::backend_test::set_backend_under_test({"cuda-emulated",
                                                   [](gpuledger::Ledger& l) -> std::unique_ptr<gpuledger::Device> {
                                                     return std::make_unique<gpuledger::EmuDevice>(l);
                                                   },
                                                   /*own_gemm=*/false});
  return RUN_ALL_TESTS();
}
