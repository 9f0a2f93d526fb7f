// Device basics: the registry (cpu, meta, cuda, unknown), CPU host memory
// (alignment, copies, zero fill, the ledger sees every buffer), the meta
// backend's buffers (booked, no memory), and AttnShape::scale.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_device.h"
#include "kernels/device.h"
#include "kernels/meta/meta_device.h"
#include "kernels/registry/registry.h"

namespace gpuledger {
namespace {

TEST(Registry, MakesCpuAndMeta) {
  Ledger l;
  auto cpu = make_device("cpu", l);
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->name(), "cpu");
  EXPECT_TRUE(cpu->touches_memory());
  EXPECT_EQ(&cpu->ledger(), &l);
  auto meta = make_device("meta", l);
  EXPECT_EQ(meta->name(), "meta");
  EXPECT_FALSE(meta->touches_memory());
}

TEST(Registry, CudaAndUnknownBackendsSayWhy) {
  Ledger l;
  // (registry.cpp stays the only file with #if GPULEDGER_HAVE_CUDA.)
  if constexpr (GPULEDGER_HAVE_CUDA) {
    try {
      EXPECT_EQ(make_device("cuda", l)->name(), "cuda");  // a GPU is present
    } catch (const std::invalid_argument& e) {
      // No GPU (CI, this machine): the reason, from cudaGetDeviceCount.
      EXPECT_EQ(std::string(e.what()).rfind("cuda: no GPU found (cudaGetDeviceCount: ", 0), 0u) << e.what();
    }
  } else {
    try {
      make_device("cuda", l);
      FAIL() << "expected std::invalid_argument";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()), "cuda backend not built (configure with CUDA)");
    }
  }
  try {
    make_device("tpu", l);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'tpu'"), std::string::npos) << e.what();
  }
}

TEST(CpuDevice, DescriptionNamesTheGemmAndThreads) {
  Ledger l;
  CpuDevice d(l);
  const std::string desc = d.description();
  EXPECT_EQ(desc.rfind("CPU, ", 0), 0u) << desc;
  EXPECT_NE(desc.find(GPULEDGER_HAVE_BLAS ? "OpenBLAS" : "built-in GEMM"), std::string::npos) << desc;
  EXPECT_NE(desc.find("thread"), std::string::npos) << desc;
}

TEST(CpuDevice, AllocationsAreAlignedAndBooked) {
  Ledger l;
  CpuDevice d(l);
  std::vector<Buffer> bufs;
  for (int64_t bytes : {1, 3, 64, 100, 4096, 0}) {
    bufs.push_back(d.alloc(bytes, Account::kActivations));
    EXPECT_NE(bufs.back().data(), nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(bufs.back().data()) % 64, 0u) << bytes;
  }
  EXPECT_EQ(l.live(Account::kActivations), 1 + 3 + 64 + 100 + 4096 + 0);  // requested, not rounded
  EXPECT_EQ(l.count(Account::kActivations), 6);
  bufs.clear();
  EXPECT_EQ(l.live_total(), 0);
}

TEST(CpuDevice, CopiesAndZeroFill) {
  Ledger l;
  CpuDevice d(l);
  const int n = 1000;
  std::vector<float> host(n), back(n, -1.0f);
  for (int i = 0; i < n; ++i) host[i] = 0.5f * i - 3.0f;
  Buffer a = d.alloc(n * 4, Account::kActivations), b = d.alloc(n * 4, Account::kActivations);
  d.copy_from_host(a.data(), host.data(), n * 4);
  d.copy(b.data(), a.data(), n * 4);
  d.copy_to_host(back.data(), b.data(), n * 4);
  EXPECT_EQ(back, host);
  d.fill_zero(b.as<char>() + 40, 400);  // elements 10..109
  d.copy_to_host(back.data(), b.data(), n * 4);
  for (int i = 0; i < n; ++i) EXPECT_EQ(back[i], (i >= 10 && i < 110) ? 0.0f : host[i]) << i;
  // Overlapping device copy (memmove semantics): shift elements 0..99 up by one.
  d.copy(a.as<float>() + 1, a.as<float>(), 100 * 4);
  d.copy_to_host(back.data(), a.data(), n * 4);
  for (int i = 1; i <= 100; ++i) EXPECT_EQ(back[i], host[i - 1]) << i;
}

TEST(MetaDevice, BuffersAreBookedButHoldNoMemory) {
  Ledger l(1 << 20);
  MetaDevice d(l);
  {
    Buffer b = d.alloc(int64_t{1} << 19, Account::kWeights, "w");
    EXPECT_FALSE(b.empty());
    EXPECT_EQ(b.data(), nullptr);
    EXPECT_EQ(l.live(Account::kWeights), int64_t{1} << 19);
    EXPECT_THROW(d.alloc((int64_t{1} << 19) + 1, Account::kGrads), OutOfMemory);  // the limit holds on meta too
  }
  EXPECT_EQ(l.live_total(), 0);
  std::vector<uint8_t> host(16, 0xAB);
  d.copy_to_host(host.data(), nullptr, 16);
  for (uint8_t v : host) EXPECT_EQ(v, 0);
  EXPECT_EQ(d.sum_squares(nullptr, DType::kFP32, 1000), 0.0);
}

TEST(AttnShape, ScaleIsOneOverSqrtHeadDim) {
  AttnShape s;
  s.D = 64;
  EXPECT_EQ(s.scale(), 0.125f);  // 1/8 exactly
  s.D = 128;
  EXPECT_FLOAT_EQ(s.scale(), 0.08838834764831845f);  // 1/sqrt(128)
}

}  // namespace
}  // namespace gpuledger
