// CLI tests for the multi-head latent attention presets: `models` prints the
// published counts, `kv` and `serve-plan` size the latent cache (figures worked
// by hand in docs/formulas/mla.md), and what the runs do not build (infer's
// latent cache, the flash core, attention dropout) is refused with exit 2.
// Training MLA models: test_cli_train_mla.cpp.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "run_cli.h"

using gpuledger::testing::contains;
using gpuledger::testing::run_cli;

namespace {

TEST(CliMla, ModelsPrintThePublishedCounts) {
  auto r = run_cli({"models", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = r.json();
  std::map<std::string, int64_t> params, active, mtp;
  for (const auto& m : doc["models"]) {
    params[m["name"]] = m["params"];
    active[m["name"]] = m["active_params"];
    if (m.contains("mtp_params")) mtp[m["name"]] = m["mtp_params"];
  }
  EXPECT_EQ(mtp.size(), 1u);  // only deepseek-v3 has an MTP module
  EXPECT_EQ(mtp.at("deepseek-v3"), 11'610'068'224);
  EXPECT_EQ(params.at("deepseek-v3"), 671'026'419'200);
  EXPECT_EQ(active.at("deepseek-v3"), 37'552'297'472);
  EXPECT_EQ(params.at("deepseek-v2-lite"), 15'706'484'224);
}

// 61 layers · (512 + 64) · 2 B = 70,272 B per token, the same on each of 8 TP ranks.
TEST(CliMla, KvSizesTheLatentWholeUnderTp) {
  for (const char* tp : {"1", "8"}) {
    auto r =
        run_cli({"kv", "--model", "deepseek-v3", "--tp", tp, "--context", "4096", "--requests", "4", "--json", "-"});
    ASSERT_EQ(r.status, 0) << r.err;
    const auto doc = r.json();
    const auto& rank = doc["ranks"][0];
    EXPECT_EQ(rank["kv_bytes_per_token"].get<int64_t>(), 70'272) << "tp " << tp;
    EXPECT_EQ(rank["kv_heads"].get<int64_t>(), 1);
    EXPECT_EQ(rank["per_sequence"]["reserved_bytes"].get<int64_t>(), 4096LL * 70'272);
    EXPECT_EQ(rank["analytic"]["exact"]["kv"].get<int64_t>(), 1'152'460'800);  // (4·256 + 1) blocks of 16 tokens
    EXPECT_EQ(doc["config"]["model"]["kv_lora_rank"].get<int64_t>(), 512);
  }
  auto table = run_cli({"kv", "--model", "deepseek-v3", "--context", "4096"});
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_TRUE(contains(table.out, "MLA latent")) << table.out;
  EXPECT_TRUE(contains(table.out, "68.62 KiB")) << table.out;
}

// 27 · 576 · 2 = 31,104 B per token; 20 sequences sized (16.01 × headroom 1.2) of 2,000 tokens.
TEST(CliMla, ServePlanSizesTheLatent) {
  auto r = run_cli({"serve-plan", "--model", "deepseek-v2-lite", "--qps", "1", "--prompt-tokens", "1000",
                    "--output-tokens", "1000", "--devices", "h100-sxm", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = r.json();
  EXPECT_EQ(doc["model"]["kv_bytes_per_token"].get<int64_t>(), 31'104);
  const auto& plan = doc["devices"][0]["single"];
  EXPECT_EQ(plan["kv_bytes"].get<int64_t>(), plan["sized_sequences"].get<int64_t>() * 2000 * 31'104);
}

TEST(CliMla, WhatIsNotBuiltIsRefusedNamingMla) {
  const std::vector<std::vector<std::string>> commands = {
      {"infer", "--model", "tiny-mla", "--device-memory", "1Gi"},
      {"train", "--model", "tiny-mla", "--attention", "flash", "--steps", "1"},
      {"plan", "--model", "tiny-mla", "--dropout", "0.1"}};
  for (const auto& args : commands) {
    auto r = run_cli(args);
    EXPECT_EQ(r.status, 2) << args[0] << ": " << r.err;
    EXPECT_TRUE(contains(r.err, "multi-head latent attention")) << r.err;
  }
  auto fp8 = run_cli({"kv", "--model", "deepseek-v3", "--kv-dtype", "fp8"});
  EXPECT_EQ(fp8.status, 2);
  EXPECT_TRUE(contains(fp8.err, "--kv-dtype fp8")) << fp8.err;
}

}  // namespace
