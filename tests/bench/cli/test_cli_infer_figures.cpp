// CLI tests for the figures infer, kv and peak print about the machine and
// the prefill: `infer --attention` honoured (the profiled prefill peak equals
// the analytic one, checked, for flash and materialized), `kv` predicting the
// same bytes for the same chunk, the read STREAM and the hardware peak in
// `peak`, MFU against both peaks in `infer`.
//
// tiny-llama in fp32, a 64-token chunk (tests/analytic/test_inference.cpp by
// hand): flash 217088 bytes (the MLP), materialized 229632 (the scores).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "run_cli.h"

using gpuledger::testing::run_cli;

namespace {

constexpr int64_t kFlashBytes = 217'088, kMaterializedBytes = 229'632;

nlohmann::json find_check(const nlohmann::json& checks, const std::string& name) {
  for (const auto& c : checks)
    if (c["name"] == name) return c;
  return nullptr;
}

TEST(CliInferFigures, AttentionIsHonouredAndKvPredictsWhatInferMeasures) {
  for (const auto& [attention, bytes] :
       std::vector<std::pair<std::string, int64_t>>{{"flash", kFlashBytes}, {"materialized", kMaterializedBytes}}) {
    SCOPED_TRACE(attention);
    auto r = run_cli({"infer", "--model", "tiny-llama", "--dtype", "fp32", "--attention", attention, "--device-memory",
                      "64Mi", "--requests", "2", "--prompt-len", "40", "--gen-len", "3", "--max-num-batched-tokens",
                      "64", "--json", "-"});
    ASSERT_EQ(r.status, 0) << r.err;
    const auto doc = r.json();
    EXPECT_EQ(doc["config"]["run"]["attention"], attention);
    const auto& rank = doc["ranks"][0];
    EXPECT_EQ(rank["measured"]["activation_peak_bytes"], bytes);
    EXPECT_EQ(rank["analytic"]["exact"]["activation_peak"], bytes);
    const auto check = find_check(doc["checks"], "activation_peak");
    ASSERT_FALSE(check.is_null());
    EXPECT_TRUE(check["ok"].get<bool>());

    auto k = run_cli({"kv", "--model", "tiny-llama", "--dtype", "fp32", "--attention", attention, "--context", "64",
                      "--prefill-chunk", "64", "--device-memory", "64Mi", "--json", "-"});
    ASSERT_EQ(k.status, 0) << k.err;
    EXPECT_EQ(k.json()["ranks"][0]["analytic"]["exact"]["activations"], bytes);
  }
}

TEST(CliInferFigures, MfuIsTakenAgainstTheMeasuredAndTheHardwarePeak) {
  auto r = run_cli({"infer", "--model", "tiny-llama", "--device-memory", "64Mi", "--requests", "2", "--prompt-len", "8",
                    "--gen-len", "4", "--prefill-chunk", "64", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto s = r.json()["summary"];
  EXPECT_NE(s["bandwidth_source"].get<std::string>().find("STREAM read"), std::string::npos);
  ASSERT_TRUE(s["hardware_peak_flops"].is_number()) << s["hardware_peak_source"];
  EXPECT_GT(s["hardware_peak_flops"].get<double>(), 0);
  EXPECT_EQ(s["hardware_peak_fma"]["from"], "measured") << s;
  EXPECT_TRUE(s["decode"]["mfu_hardware"].is_number());
  const auto checks = r.json()["checks"];
  EXPECT_TRUE(find_check(checks, "decode.mfu (measured peak) <= 1")["ok"].get<bool>());
  EXPECT_TRUE(find_check(checks, "decode.mfu (hardware peak) <= 1")["ok"].get<bool>());
}

TEST(CliInferFigures, MaterializedAttentionUnderAKvBudgetIsRefused) {
  auto r = run_cli({"infer", "--model", "tiny-llama", "--device-memory", "64Mi", "--attention", "materialized",
                    "--kv-policy", "h2o", "--kv-budget", "32"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--attention materialized"), std::string::npos) << r.err;
}

TEST(CliPeak, TheCpuBandwidthIsAReadStreamWithItsMethodAndTheHardwarePeakBesideIt) {
  auto r = run_cli(
      {"peak", "--quick", "--dtypes", "fp32", "--reps", "1", "--warmup", "0", "--bandwidth-mib", "8", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = r.json();
  const auto& bw = doc["bandwidth"];
  EXPECT_EQ(bw["method"], "read");
  EXPECT_EQ(bw["arrays"], 2);
  EXPECT_EQ(bw["bytes_per_array"], 8 << 20);  // --bandwidth-mib overrides the sizing rule
  EXPECT_GE(bw["threads"].get<int>(), 1);
  EXPECT_TRUE(bw["llc_bytes"].is_number());
  EXPECT_GT(bw["bytes_per_s"].get<double>(), 0);
  EXPECT_TRUE(doc["summary"]["hardware_peak_flops"].is_number());
  EXPECT_NE(doc["summary"]["hardware_peak_source"].get<std::string>().find("FLOP/s"), std::string::npos);
  // The FLOPs per cycle the hardware peak took: measured on one core, the table beside them.
  const auto& fma = doc["summary"]["hardware_peak_fma"];
  ASSERT_TRUE(fma.is_object()) << doc["summary"];
  EXPECT_EQ(fma["from"], "measured");
  ASSERT_FALSE(fma["measured"].empty());
  EXPECT_GT(fma["flops_per_cycle_per_cpu"].get<double>(), 0);
  EXPECT_EQ(fma["flops_per_cycle_per_cpu"], fma["measured_flops_per_cycle"]);
  EXPECT_GT(fma["table"]["flops_per_cycle"].get<double>(), 0);
  // Never below the sgemm measured on the same CPUs (an MFU above 100 % would follow).
  EXPECT_GE(doc["summary"]["hardware_peak_flops"].get<double>(), doc["summary"]["peak_flops_fp32"].get<double>());
}

}  // namespace
