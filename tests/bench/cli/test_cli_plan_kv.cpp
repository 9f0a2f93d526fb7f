// CLI tests for models, devices, plan and kv: exit statuses (0 ok, 2 usage),
// error messages that say what is wrong, and the JSON reports they write.
// Expected figures are published ones or computed here by hand.
#include <gtest/gtest.h>

#include <tuple>

#include <cstdio>
#include <filesystem>

#include "run_cli.h"

using gpuledger::testing::contains;
using gpuledger::testing::run_cli;
using gpuledger::testing::scratch_dir;
using gpuledger::testing::write_file;

namespace {

TEST(CliModels, ListsPresetsWithPublishedParameterCounts) {
  auto r = run_cli({"models", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  auto doc = r.json();
  std::map<std::string, int64_t> params;
  for (const auto& m : doc["models"]) params[m["name"]] = m["params"];
  // Published counts (Meta's, Alibaba's and OpenAI's model cards).
  EXPECT_EQ(params.at("llama2-7b"), 6738415616);
  EXPECT_EQ(params.at("llama3-8b"), 8030261248);
  EXPECT_EQ(params.at("qwen2.5-7b"), 7615616512);
  EXPECT_EQ(params.at("gpt2"), 124439808);
  // The human table goes to stderr when the JSON goes to stdout.
  EXPECT_TRUE(contains(r.err, "llama3.1-405b"));
}

TEST(CliDevices, ListsDatasheetPresetsWithSources) {
  auto r = run_cli({"devices", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  bool found = false;
  const auto doc = r.json();
  for (const auto& d : doc["devices"]) {
    EXPECT_FALSE(d["source"].get<std::string>().empty()) << d["name"];
    if (d["name"] == "h100-sxm") {
      found = true;
      EXPECT_NEAR(d["peak_bf16_flops"].get<double>(), 989.4e12, 1e12);  // NVIDIA H100 datasheet, dense
    }
  }
  EXPECT_TRUE(found);
}

// The plan leads with its summary: whether each rank class fits and by how
// much, the tightest rank (the least headroom), its model states and
// activations and the step-time bound; each published source is printed once.
// --brief prints the configuration and the summary alone.
TEST(CliPlan, LeadsWithASummaryAndPrintsEachSourceOnce) {
  const std::vector<std::string> args = {"plan",      "--model",  "llama3-70b", "--dp",           "8",  "--tp",
                                         "8",         "--pp",     "4",          "--zero",         "1",  "--seq",
                                         "8192",      "--mbs",    "1",          "--microbatches", "32", "--recompute",
                                         "selective", "--device", "h100-sxm"};
  auto full = run_cli(args);
  ASSERT_EQ(full.status, 0) << full.err;
  const std::string& t = full.err.empty() ? full.out : full.err;
  const auto summary = t.find("# summary");
  const auto accounts = t.find("# bytes per rank by account");
  ASSERT_NE(summary, std::string::npos) << t;
  ASSERT_NE(accounts, std::string::npos) << t;
  EXPECT_LT(summary, accounts);  // the answer before the detail
  // Stage 0 holds 4 microbatches in flight: 72.06 GiB of 80, the least headroom.
  EXPECT_NE(t.find("fits                                           yes: all 4 rank classes"), std::string::npos) << t;
  EXPECT_NE(t.find("72.06 GiB of 80.00 GiB: fits, 7.94 GiB free"), std::string::npos) << t;
  EXPECT_NE(t.find("tightest rank                                             r0 pp0 first"), std::string::npos) << t;
  EXPECT_NE(t.find("55.94 GiB (4 microbatches in flight)"), std::string::npos) << t;
  EXPECT_NE(t.find("≥ 4.73 s"), std::string::npos) << t;
  // Each published source once: one published-formulas block, Korthikanti's Table 2 note once.
  auto count = [&](const std::string& s) {
    size_t n = 0;
    for (auto at = t.find(s); at != std::string::npos; at = t.find(s, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("# published formulas for"), 1u);
  EXPECT_EQ(count("Korthikanti et al. 2022, Table 2, row tensor_selective"), 1u);
  EXPECT_EQ(count("h100-sxm datasheet"), 1u);
  // 92 lines before the predicted step; its summary row, its training time and
  // the per-stage table (middle stages that agree share a row) add about ten.
  EXPECT_LT(count("\n"), 110u);
  EXPECT_EQ(count("# predicted step"), 1u);

  auto args_brief = args;
  args_brief.push_back("--brief");
  auto brief = run_cli(args_brief);
  ASSERT_EQ(brief.status, 0) << brief.err;
  const std::string& b = brief.err.empty() ? brief.out : brief.err;
  EXPECT_NE(b.find("# summary"), std::string::npos) << b;
  EXPECT_EQ(b.find("# bytes per rank by account"), std::string::npos) << b;
  EXPECT_EQ(b.find("# published formulas"), std::string::npos) << b;
}

TEST(CliPlan, TheIssueExampleReportsEveryRoleAndAddsUp) {
  auto r = run_cli({"plan", "--model",     "llama3-70b", "--dp",     "8",        "--tp",   "8", "--pp",
                    "4",    "--zero",      "1",          "--seq",    "8192",     "--mbs",  "1", "--microbatches",
                    "32",   "--recompute", "selective",  "--device", "h100-sxm", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  auto doc = r.json();
  EXPECT_EQ(doc["schema"], "gpuledger.report/1");
  EXPECT_EQ(doc["kind"], "plan");
  EXPECT_EQ(doc["status"], "ok");
  ASSERT_EQ(doc["ranks"].size(), 4u);  // one role per pipeline stage
  for (size_t i = 0; i < 4; ++i) {
    const auto& rank = doc["ranks"][i];
    EXPECT_EQ(rank["coords"]["pp"], static_cast<int64_t>(i));
    // rank = tp + 8·(dp + 8·pp) with tp = dp = 0
    EXPECT_EQ(rank["rank"], static_cast<int64_t>(64 * i));
    int64_t sum = 0;
    for (auto a : {"weights", "grads", "master", "optim", "activations", "kv", "comm", "workspace"})
      sum += rank["analytic"]["exact"][a].get<int64_t>();
    EXPECT_EQ(sum, rank["analytic"]["exact"]["total"].get<int64_t>());
    // 1F1B: stage i of 4 holds 4 − i microbatches.
    EXPECT_EQ(rank["in_flight_microbatches"], static_cast<int64_t>(4 - i));
    EXPECT_EQ(rank["fits"].get<bool>(), rank["headroom_bytes"].get<int64_t>() >= 0);
  }
  // ZeRO-1 over dp 8 shards master (4 B) and optim (8 B): optim = 2 × master exactly.
  const auto& e = doc["ranks"][1]["analytic"]["exact"];
  EXPECT_EQ(e["optim"].get<int64_t>(), 2 * e["master"].get<int64_t>());
  EXPECT_EQ(e["grads"].get<int64_t>(), e["weights"].get<int64_t>());  // bf16 both, unsharded
  EXPECT_EQ(doc["params"]["total"], 70553706496);
  EXPECT_NEAR(doc["summary"]["bubble_fraction"].get<double>(), 3.0 / 35.0, 1e-12);
  // The table goes to stderr and names every account.
  for (auto a : {"weights", "grads", "master", "optim", "activations", "comm", "workspace"})
    EXPECT_TRUE(contains(r.err, a)) << a;
}

TEST(CliPlan, WritesTheReportAtomicallyToAFile) {
  const std::string path = scratch_dir("plan") + "/sub/plan.json";
  auto r = run_cli({"plan", "--model", "gpt2", "--json", path});
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_TRUE(std::filesystem::exists(path));
  EXPECT_TRUE(contains(r.out, "weights"));  // the table on stdout
  for (const auto& f : std::filesystem::directory_iterator(std::filesystem::path(path).parent_path()))
    EXPECT_EQ(f.path().filename(), "plan.json") << "temporary file left behind";
}

TEST(CliErrors, UsageErrorsExitTwoAndSayWhatIsWrong) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::string dir = scratch_dir("errors");
  write_file(dir + "/broken.json", "{\n  \"name\": \"x\",\n  \"layers\": 2,,\n}\n");
  write_file(dir + "/unknown.json",
             R"({"name": "x", "flavour": "gpt", "layers": 2, "hidden": 64, "heads": 4, "ffn": 256,
                 "vocab": 97, "max_seq": 64, "colour": "blue"})");
  const std::vector<Case> cases = {
      {{"plan", "--model", "no-such-model"}, "llama3-8b"},         // lists the known presets
      {{"plan", "--model", "llama3-8b", "--tp", "3"}, "divide"},   // heads 32 % 3
      {{"plan", "--model", "llama3-8b", "--pp", "64"}, "layers"},  // 64 stages > 32 layers
      {{"plan", "--model", dir + "/broken.json"}, ":3:"},          // line 3 of the file
      {{"plan", "--model", dir + "/unknown.json"}, "colour"},      // names the unknown field
      {{"plan", "--model", "gpt2", "--dp", "2", "--gbs", "3"}, "multiple"},
      {{"plan", "--model", "gpt2", "--device", "tpu-v9"}, "h100-sxm"},
      {{"plan", "--model", "gpt2", "--device-memory", "80X"}, "suffix"},
      {{"plan", "--model", "gpt2", "--seq", "2048"}, "max_seq"},  // learned positions: 1024
      {{"plan", "--model", "gpt2", "--ranks", "7"}, "rank"},
      {{"plan", "--no-such-option"}, "no-such-option"},
      {{"plan", "--model", "gpt2", "--recompute", "sometimes"}, "recompute"},
      {{}, "subcommand"},
  };
  for (const auto& c : cases) {
    auto r = run_cli(c.args);
    std::string joined;
    for (const auto& a : c.args) joined += a + " ";
    EXPECT_EQ(r.status, 2) << joined << "\n" << r.err;
    EXPECT_TRUE(contains(r.err + r.out, c.message)) << joined << "\nexpected '" << c.message << "' in:\n" << r.err;
  }
}

TEST(CliErrors, HelpExitsZero) {
  for (auto cmd : {"models", "devices", "plan", "kv"}) {
    auto r = run_cli({cmd, "--help"});
    EXPECT_EQ(r.status, 0) << cmd;
    EXPECT_TRUE(contains(r.out, "--json")) << cmd;
  }
}

// bf16 KV bytes per token: 2 (K, V) · layers · kv_heads · head_dim · 2 bytes.
TEST(CliKv, PublishedPerTokenFigures) {
  const std::vector<std::pair<std::string, int64_t>> cases = {{"llama2-7b", 2 * 32 * 32 * 128 * 2},    // 512 KiB
                                                              {"llama3-8b", 2 * 32 * 8 * 128 * 2},     // 128 KiB
                                                              {"qwen2.5-7b", 2 * 28 * 4 * 128 * 2},    // 56 KiB
                                                              {"qwen2.5-32b", 2 * 64 * 8 * 128 * 2}};  // 256 KiB
  for (const auto& [model, bytes] : cases) {
    auto r = run_cli({"kv", "--model", model, "--seq", "1024", "--json", "-"});
    ASSERT_EQ(r.status, 0) << model << r.err;
    EXPECT_EQ(r.json()["summary"]["kv_bytes_per_token"].get<int64_t>(), bytes) << model;
  }
  EXPECT_EQ(512 * 1024, 2 * 32 * 32 * 128 * 2);
}

TEST(CliKv, TensorParallelSplitsAndReplicatesKvHeads) {
  // llama3-8b has 8 KV heads: tp 4 -> 2 per rank; tp 16 -> 1 per rank (replicated).
  auto r4 = run_cli({"kv", "--model", "llama3-8b", "--tp", "4", "--json", "-"});
  ASSERT_EQ(r4.status, 0) << r4.err;
  EXPECT_EQ(r4.json()["summary"]["kv_bytes_per_token"].get<int64_t>(), 2 * 32 * 2 * 128 * 2);
  auto r16 = run_cli({"kv", "--model", "llama3-8b", "--tp", "16", "--json", "-"});
  ASSERT_EQ(r16.status, 0) << r16.err;
  EXPECT_EQ(r16.json()["summary"]["kv_bytes_per_token"].get<int64_t>(), 2 * 32 * 1 * 128 * 2);
}

// "GPU KV cache size: N tokens; Maximum concurrency for 8,192 tokens per request: X.XXx"
std::string fmt_line(int64_t blocks) {
  char conc[32];
  std::snprintf(conc, sizeof conc, "%.2fx", static_cast<double>(blocks) / 512);
  const int64_t tokens = blocks * 16;  // below a million here: one thousands separator
  char count[32];
  std::snprintf(count, sizeof count, "%lld,%03lld", static_cast<long long>(tokens / 1000),
                static_cast<long long>(tokens % 1000));
  return std::string("GPU KV cache size: ") + count +
         " tokens; Maximum concurrency for 8,192 tokens per request: " + conc;
}

TEST(CliKv, Int4BytesPerTokenWithGroupScales) {
  // Llama-3-8B, one rank: values 2·32·8·128/2 = 32,768 B; per group of G an
  // fp16 scale and zero (4 B): 2·32·8·(128/G)·4 = 8,192 B at G = 32, 4,096 B at 64.
  for (const auto& [group, scale_bytes, per_element] :
       {std::tuple<const char*, int64_t, double>{"32", 8192, 0.625}, {"64", 4096, 0.5625}}) {
    auto r = run_cli({"kv", "--model", "llama3-8b", "--kv-dtype", "int4", "--kv-group-size", group, "--context", "100",
                      "--json", "-"});
    ASSERT_EQ(r.status, 0) << r.err;
    const auto doc = r.json();
    EXPECT_EQ(doc["config"]["kv"]["scales"], "group");
    EXPECT_EQ(doc["config"]["kv"]["group_size"], std::stoll(group));
    EXPECT_EQ(doc["summary"]["kv_bytes_per_token"], 32768);
    EXPECT_EQ(doc["summary"]["kv_scale_bytes_per_token"], scale_bytes);
    EXPECT_EQ(doc["summary"]["kv_bytes_per_element"].get<double>(), per_element);
    // paged, B = 16: (⌈100/16⌉ + 1 null) blocks of 16 tokens
    EXPECT_EQ(doc["summary"]["kv_reserved_bytes"], 8 * 16 * (32768 + scale_bytes));
  }
}

TEST(CliKv, Int4BadGroupOrScalesExitTwo) {
  auto bad = [](std::initializer_list<const char*> extra) {
    std::vector<std::string> args = {"kv", "--model", "llama3-8b"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cli(args);
  };
  for (auto r :
       {bad({"--kv-dtype", "int4", "--kv-group-size", "48"}),  // does not divide 128
        bad({"--kv-dtype", "int4", "--kv-group-size", "1"}),   // below 2
        bad({"--kv-dtype", "int4", "--kv-scales", "channel"}), bad({"--kv-dtype", "int8", "--kv-scales", "group"})}) {
    EXPECT_EQ(r.status, 2);
    EXPECT_FALSE(r.err.empty());
  }
  EXPECT_NE(bad({"--kv-dtype", "int4", "--kv-group-size", "48"}).err.find("divide the head dim 128"),
            std::string::npos);
}

TEST(CliKv, CapacityUnderTheMemoryRule) {
  auto r = run_cli(
      {"kv", "--model", "llama3-8b", "--device", "h100-sxm", "--context", "8192", "--kv", "paged", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = r.json();
  const auto& rank = doc["ranks"][0];
  const int64_t pool = rank["capacity"]["pool_bytes"];
  const int64_t seqs = rank["capacity"]["sequences"];
  const int64_t block_bytes = 16 * 2 * 32 * 8 * 128 * 2;  // 16 tokens per block
  const int64_t blocks_per_seq = 8192 / 16;
  // Capacity: whole sequences of 8192 tokens in the pool less vLLM's null block.
  EXPECT_EQ(seqs, (pool / block_bytes - 1) / blocks_per_seq);
  EXPECT_GT(seqs, 0);
  EXPECT_GT(doc["summary"]["decode_roofline"]["tokens_per_s"].get<double>(), 0.0);
  // vLLM's current defaults: gpu_memory_utilization 0.92; max_num_batched_tokens
  // 8192 for `vllm serve` on an 80 GiB H100.
  EXPECT_EQ(doc["config"]["kv"]["memory_utilization"].get<double>(), 0.92);
  EXPECT_EQ(doc["config"]["kv"]["prefill_chunk"].get<int64_t>(), 8192);
  // What vLLM logs: the null block counted, max_model_len (8192) per request.
  const auto& v = rank["vllm"];
  const int64_t blocks = v["num_gpu_blocks"];
  EXPECT_EQ(blocks, v["available_kv_bytes"].get<int64_t>() / block_bytes);
  EXPECT_DOUBLE_EQ(v["max_concurrency"].get<double>(), static_cast<double>(blocks) / blocks_per_seq);
  EXPECT_EQ(v["kv_cache_size_tokens"].get<int64_t>(), blocks * 16);
  // With no overhead given, vLLM's pool is ours: one block more (the null block).
  EXPECT_EQ(v["available_kv_bytes"].get<int64_t>(), pool);
  EXPECT_EQ(rank["capacity"]["tokens"].get<int64_t>(), (blocks - 1) * 16);
  // The CLI prints vLLM's own line.
  auto t = run_cli({"kv", "--model", "llama3-8b", "--device", "h100-sxm", "--context", "8192"});
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_NE(t.out.find(fmt_line(blocks)), std::string::npos) << t.out;
}

}  // namespace

namespace {

// --offload optimizer: the master and Adam states leave the device for the
// host account, which then holds (4 + 8 + 2 + 2)·S_r for bf16 AdamW — 4× the
// master of the same plan without offload (4·S_r); each step copies 2·S_r
// bytes each way on rank 0 (every unit's shard full). DeepSpeed's offload rows
// are theirs: 2P on the GPU, int(P·max(4N, 16)·1.5) on the node's CPU. ZeRO 0
// is refused.
TEST(CliPlan, OffloadOptimizerMovesMasterAndStatesToTheHost) {
  const std::vector<std::string> base = {"plan", "--model",  "llama2-7b", "--dp",   "8", "--zero",
                                         "2",    "--seq",    "4096",      "--mbs",  "1", "--microbatches",
                                         "4",    "--device", "a100-80gb", "--json", "-"};
  auto plain = run_cli(base);
  ASSERT_EQ(plain.status, 0) << plain.err;
  auto args = base;
  args.insert(args.end(), {"--offload", "optimizer"});
  auto off = run_cli(args);
  ASSERT_EQ(off.status, 0) << off.err;
  const auto p = plain.json()["ranks"][0], o = off.json()["ranks"][0];
  const auto &pe = p["analytic"]["exact"], &oe = o["analytic"]["exact"];
  const int64_t shard = pe["master"].get<int64_t>() / 4;  // S_r
  EXPECT_EQ(oe["master"], 0);
  EXPECT_EQ(oe["optim"], 0);
  EXPECT_EQ(oe["host"].get<int64_t>(), 16 * shard);
  EXPECT_EQ(o["host_bytes"], oe["host"]);
  EXPECT_EQ(oe["weights"], pe["weights"]);
  EXPECT_EQ(oe["grads"], pe["grads"]);
  EXPECT_EQ(oe["total"].get<int64_t>(), pe["total"].get<int64_t>() - 12 * shard);  // the device total: host excluded
  EXPECT_EQ(o["headroom_bytes"].get<int64_t>(), o["device_bytes"].get<int64_t>() - oe["total"].get<int64_t>());
  EXPECT_EQ(o["analytic"]["comm"]["copy_d2h@host"]["bytes"].get<int64_t>(), 2 * shard);
  EXPECT_EQ(o["analytic"]["comm"]["copy_h2d@host"]["bytes"].get<int64_t>(), 2 * shard);
  const int64_t psi = 6738415616;  // Llama-2-7B (Meta's model card)
  const auto& pub = o["analytic"]["published"];
  EXPECT_EQ(pub["deepspeed_zero2_offload_gpu"]["bytes"].get<double>(), 2.0 * psi);
  EXPECT_EQ(pub["deepspeed_zero2_offload_cpu"]["bytes"].get<double>(), 48.0 * psi);  // max(4·8, 16)·1.5
  EXPECT_EQ(pub["deepspeed_zero2_offload_cpu"]["exact"].get<double>(), 8.0 * oe["host"].get<double>());
  EXPECT_TRUE(contains(off.err, "host (not device memory)"));

  auto zero0 = run_cli({"plan", "--model", "tiny-llama", "--dp", "2", "--offload", "optimizer"});
  EXPECT_EQ(zero0.status, 2);
  EXPECT_TRUE(contains(zero0.err, "--offload optimizer needs --zero 1, 2 or 3")) << zero0.err;
}

// kv for a MoE model: the weights are every expert's (tiny-moe: 34,272
// parameters, bf16), a decode step of 3 sequences reads the experts 3 tokens
// are expected to route to under uniform routing — 4·(1 − (1/2)³) = 3.5 of 4
// per layer, so 2 layers · 0.5 · 4608 B = 4608 B unread — and their K/V.
TEST(CliKv, MoeWeightsAreAllExpertsAndDecodeReadsTheExpectedOnes) {
  auto r =
      run_cli({"kv", "--model", "tiny-moe", "--device", "h100-sxm", "--context", "32", "--batch", "3", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto rank = r.json()["ranks"][0];
  EXPECT_EQ(rank["analytic"]["exact"]["weights"], 34'272 * 2);
  const int64_t weights_read = (34'272 - 97 * 32 + 3 * 32) * 2 - 4608;  // the table but 3 rows, one expert less
  const int64_t kv_read = 3 * 32 * 128;                                 // 3 sequences of 32 tokens, 128 B each
  EXPECT_EQ(rank["decode_roofline"]["bytes_per_step"], weights_read + kv_read);
}

// Context parallelism at Llama 3.1 405B's long-context shape: cp 8 × dp 2,
// seq 131072 (s/cp = 16384 tokens a rank). Every cp rank holds the same
// budget (load-balanced chunks), the activations are those of one rank at
// seq 16384, and the ring moves, per rank, B_kv = 2·1·16384·8·128·2 =
// 67,108,864 B blocks: 126 layers × 2 microbatches × (7 forward + 8 backward)
// = 3780 sends, (7 + 14)·252·B_kv = 355,140,108,288 B.
TEST(CliPlan, ContextParallelRingAt405B) {
  const std::vector<std::string> base = {"plan",           "--model", "llama3.1-405b", "--seq", "131072", "--mbs", "1",
                                         "--microbatches", "2",       "--attention",   "flash", "--json", "-"};
  auto args = base;
  args.insert(args.end(), {"--cp", "8", "--dp", "2", "--ranks", "0,5,9"});
  auto cp = run_cli(args);
  ASSERT_EQ(cp.status, 0) << cp.err;
  const auto doc = cp.json();
  EXPECT_EQ(doc["config"]["layout"]["cp"], 8);
  EXPECT_EQ(doc["config"]["layout"]["world"], 16);
  ASSERT_EQ(doc["ranks"].size(), 3u);
  EXPECT_EQ(doc["ranks"][1]["coords"]["cp"], 5);
  EXPECT_EQ(doc["ranks"][2]["coords"]["dp"], 1);  // 9 = cp 1 + 8·dp 1
  const int64_t block = 67108864;
  for (const auto& rank : doc["ranks"]) {
    EXPECT_EQ(rank["analytic"]["exact"], doc["ranks"][0]["analytic"]["exact"]) << rank["rank"];
    EXPECT_EQ(rank["analytic"]["comm"]["send@cp"]["calls"], 3780);
    EXPECT_EQ(rank["analytic"]["comm"]["send@cp"]["bytes"], 355140108288);
    EXPECT_EQ(rank["analytic"]["comm"]["recv@cp"]["bytes"], 355140108288);
  }
  args = base;
  args[4] = "16384";
  args.insert(args.end(), {"--dp", "16"});
  auto local = run_cli(args);
  ASSERT_EQ(local.status, 0) << local.err;
  const auto local_doc = local.json();
  const auto& e = doc["ranks"][0]["analytic"]["exact"];
  const auto& l = local_doc["ranks"][0]["analytic"]["exact"];
  EXPECT_EQ(e["activations"], l["activations"]);
  EXPECT_EQ(e["weights"], l["weights"]);
  // The same gradient all-reduce over dp·cp = 16 ranks as over dp 16, and the ring's 4 blocks.
  EXPECT_EQ(e["comm"].get<int64_t>(), l["comm"].get<int64_t>() + 4 * block);
  EXPECT_TRUE(contains(cp.err, "× cp 8 (ring attention)")) << cp.err;
}

}  // namespace
