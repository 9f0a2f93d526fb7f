// The op table's argument checks run in Device's entry points, once for every
// backend: cpu, meta (which computes nothing) and a profiled device reject the
// same bad call with the same message, and nothing is counted for it. The
// profiled device's per-op FLOPs are those its wrapped device counted.
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/flop_counts.h"
#include "kernels/profiling_device.h"
#include "kernels/registry/registry.h"

namespace gpuledger {
namespace {

// The message of the std::invalid_argument f throws, or "" when it throws none.
template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

struct Backends {
  Ledger cpu_ledger, meta_ledger, profiled_ledger;
  std::unique_ptr<Device> cpu = make_device("cpu", cpu_ledger);
  std::unique_ptr<Device> meta = make_device("meta", meta_ledger);
  ProfilingDevice profiled{make_device("cpu", profiled_ledger)};
  std::vector<Device*> all() { return {cpu.get(), meta.get(), &profiled}; }
};

// Every backend throws the expected message for `call`, and counts no FLOPs.
template <class Call>
void expect_rejected_everywhere(Call call, const std::string& expected) {
  Backends b;
  for (Device* d : b.all()) {
    EXPECT_EQ(message_of([&] { call(*d); }), expected) << d->name();
    EXPECT_EQ(d->executed_flops(), 0) << d->name();
  }
}

TEST(OpChecks, AttentionShapeCheckedForEveryBackendAndEveryAttentionOp) {
  AttnShape s;
  s.B = 1;
  s.Hq = 3;
  s.Hkv = 2;
  s.T = 4;
  s.D = 8;  // Hq not a multiple of Hkv
  const std::string shape = ": bad attention shape (B, Hq, Hkv, T, D) = (1, 3, 2, 4, 8); Hq must be a multiple of Hkv";
  expect_rejected_everywhere([&](Device& d) { d.split_qkv(nullptr, nullptr, nullptr, nullptr, DType::kFP32, s); },
                             "split_qkv" + shape);
  expect_rejected_everywhere([&](Device& d) { d.softmax_forward(nullptr, nullptr, DType::kFP32, s); },
                             "softmax_forward" + shape);
  expect_rejected_everywhere(
      [&](Device& d) {
        d.flash_attention_forward(nullptr, nullptr, nullptr, nullptr, nullptr, DType::kFP32, s, 0.0f, {});
      },
      "flash_attention_forward" + shape);
  s.Hq = 4;
  s.window = 0;
  expect_rejected_everywhere([&](Device& d) { d.merge_heads(nullptr, nullptr, DType::kFP32, s); },
                             "merge_heads: window must be >= 1, got 0");
}

TEST(OpChecks, DropoutRopeGemmAndAdamwCheckedForEveryBackend) {
  expect_rejected_everywhere([](Device& d) { d.dropout_forward(nullptr, nullptr, nullptr, DType::kFP32, 4, 1.5f, {}); },
                             "dropout_forward: dropout probability must be in [0, 1], got 1.500000");
  expect_rejected_everywhere([](Device& d) { d.rope_forward(nullptr, DType::kFP32, 1, 1, 1, 7, 0, 10000.0f); },
                             "rope_forward: head dim must be even, got 7");
  GemmArgs g;
  g.m = 2;
  g.n = 3;
  g.k = 4;
  g.lda = 4;
  g.ldb = 3;
  g.ldc = 2;  // ldc < n
  expect_rejected_everywhere([&](Device& d) { d.gemm(g); }, "gemm: ldc 2 < 3");
  expect_rejected_everywhere(
      [](Device& d) {
        d.adamw(nullptr, nullptr, DType::kFP32, nullptr, DType::kFP32, nullptr, nullptr, 4, 1e-3f, 0.9f, 0.95f, 1e-8f,
                0.1f, /*step=*/0, 1.0f);
      },
      "adamw: step counts from 1, got 0");
}

TEST(OpChecks, ProfiledFlopsAreTheWrappedDevicesCount) {
  Ledger ledger;
  ProfilingDevice dev(make_device("meta", ledger));
  AttnShape s;
  s.B = 2;
  s.Hq = 4;
  s.Hkv = 2;
  s.T = 16;
  s.D = 8;
  dev.flash_attention_forward(nullptr, nullptr, nullptr, nullptr, nullptr, DType::kBF16, s, 0.0f, {});
  dev.flash_attention_backward(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                               DType::kBF16, s, 0.0f, {});
  EXPECT_EQ(dev.op_times().at("flash_attention_forward").flops, flash_forward_flops(s));
  EXPECT_EQ(dev.op_times().at("flash_attention_backward").flops, flash_backward_flops(s));
  EXPECT_EQ(dev.executed_flops(), flash_forward_flops(s) + flash_backward_flops(s));
}

}  // namespace
}  // namespace gpuledger
