// "Reserved as PyTorch would" in the train and infer reports
// (measured.torch_caching_allocator): present, and bound to the ledger by
// what the allocator's rules imply — the workspace is live all run and blocks
// only round up, so allocated >= ledger peak + workspace; segments are whole
// multiples of 2 MiB; reserved >= allocated. The rules themselves are tested
// on hand sequences in tests/kernels/test_torch_caching_allocator.cpp.
#include <gtest/gtest.h>

#include "run_cli.h"

using gpuledger::testing::run_cli;

namespace {

constexpr int64_t MiB = 1 << 20;

void expect_consistent(const nlohmann::json& m, int64_t workspace_bytes) {
  ASSERT_TRUE(m.contains("torch_caching_allocator")) << m.dump();
  const auto& t = m["torch_caching_allocator"];
  EXPECT_EQ(t["cublas_workspace_bytes"].get<int64_t>(), workspace_bytes);
  EXPECT_GT(t["events"].get<int64_t>(), 0);
  const int64_t allocated = t["peak_allocated_bytes"].get<int64_t>();
  const int64_t reserved = t["peak_reserved_bytes"].get<int64_t>();
  EXPECT_GE(allocated, m["peak_bytes"].get<int64_t>() + workspace_bytes);
  EXPECT_GE(t["peak_requested_bytes"].get<int64_t>(), m["peak_bytes"].get<int64_t>() + workspace_bytes);
  EXPECT_GE(reserved, allocated);
  EXPECT_EQ(reserved % (2 * MiB), 0);
  EXPECT_GE(t["segments"].get<int64_t>(), 1);
}

TEST(CliTorchReserved, TrainReport) {
  auto r = run_cli({"train", "--backend", "meta", "--model", "tiny-llama", "--seq", "64", "--mbs", "2", "--steps", "1",
                    "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  expect_consistent(r.json()["ranks"][0]["measured"], 8'519'680);
  // Hopper: PyTorch's cuBLAS workspace is 32 MiB.
  auto h = run_cli({"train", "--backend", "meta", "--model", "tiny-llama", "--seq", "64", "--mbs", "2", "--steps", "1",
                    "--device", "h100-sxm", "--json", "-"});
  ASSERT_EQ(h.status, 0) << h.err;
  expect_consistent(h.json()["ranks"][0]["measured"], 32 * MiB);
}

TEST(CliTorchReserved, InferReport) {
  auto r = run_cli({"infer", "--model", "tiny-llama", "--device-memory", "256Mi", "--requests", "4", "--prompt-len",
                    "32", "--gen-len", "8", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  expect_consistent(r.json()["ranks"][0]["measured"], 8'519'680);
}

}  // namespace
