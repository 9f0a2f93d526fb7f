// CLI tests for what `gpuledger sweep` does with a point it cannot run: an
// input wrong in itself (an unknown preset, a malformed or missing model file,
// an unknown device, a bad size, a value that is an option) is a usage error
// naming the point, before anything runs or is written, for every subcommand
// a sweep runs (plan, kv, train on the cpu and meta backends, infer); a sweep
// whose every point the subcommand refuses is never exit 0, whether the
// refusals are known before the points run or only as their jobs start.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "run_cli.h"

using gpuledger::testing::contains;
using gpuledger::testing::read_json;
using gpuledger::testing::run_cli;
using gpuledger::testing::scratch_dir;
using gpuledger::testing::write_file;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::string joined(const std::vector<std::string>& args) {
  std::string s;
  for (const auto& a : args) s += a + " ";
  return s;
}

// Every subcommand a sweep runs, with fixed options that let tiny-llama run.
const std::vector<std::vector<std::string>> kEverySubcommand = {
    {"plan"},
    {"kv", "--device", "h100-sxm"},
    {"train", "--backend", "cpu", "--steps", "1", "--warmup", "0", "--seq", "16"},
    {"train", "--backend", "meta", "--world", "2", "--steps", "1", "--warmup", "0", "--seq", "16"},
    {"infer", "--device-memory", "1Gi", "--prompt-len", "8", "--gen-len", "2"},
};

// Runs `sweep <sub...> <grid...> --out DIR` and checks it is a usage error
// whose message holds `fragment`, with nothing written: no folder, so no point
// ran and no report of one exists.
void expect_usage_before_anything(const std::vector<std::string>& sub, const std::vector<std::string>& grid,
                                  const std::string& fragment) {
  const std::string out = scratch_dir("sweep-inputs") + "/out";
  const auto args = cat(cat(cat({"sweep"}, sub), grid), {"--out", out});
  const auto r = run_cli(args);
  EXPECT_EQ(r.status, 2) << joined(args) << "\n" << r.err;
  EXPECT_TRUE(contains(r.err, fragment)) << joined(args) << "\n" << r.err;
  EXPECT_FALSE(fs::exists(out)) << joined(args);
}

}  // namespace

TEST(CliSweepInputs, AMalformedModelFileBesideAGoodPresetIsAUsageErrorForEverySubcommand) {
  const std::string bad = scratch_dir("sweep-inputs-bad") + "/bad.json";
  write_file(bad, "{bad");
  for (const auto& sub : kEverySubcommand) {
    // The bad file comes second: a point that could run comes first and must not have run.
    expect_usage_before_anything(sub, {"--grid", "model=tiny-llama," + bad}, "malformed JSON");
    expect_usage_before_anything(sub, {"--grid", "model=tiny-llama," + bad}, "(model=" + bad + ")");
  }
}

TEST(CliSweepInputs, AnUnknownPresetOrAMissingFileNamesThePoint) {
  for (const auto& sub : kEverySubcommand) {
    expect_usage_before_anything(sub, {"--grid", "model=tiny-llama,no-such-model"},
                                 "point model-no-such-model (model=no-such-model): unknown model preset");
    expect_usage_before_anything(sub, {"--grid", "model=/nonexistent/m.json,tiny-llama"}, "cannot open");
  }
}

TEST(CliSweepInputs, AValueThatLooksLikeAnOptionIsAnError) {
  expect_usage_before_anything({"plan"}, {"--grid", "model=--json"},
                               "--grid model: value '--json' looks like an option");
  expect_usage_before_anything({"plan"}, {"--grid", "model=tiny-llama,-q"}, "value '-q' looks like an option");
  // A negative number is a value: --tp's own check refuses it.
  expect_usage_before_anything({"plan", "--model", "tiny-llama"}, {"--grid", "tp=-1,1"},
                               "point tp--1 (tp=-1): --tp: Value -1 not in range");
}

TEST(CliSweepInputs, ABadDeviceSizeOrPercentileIsAUsageError) {
  expect_usage_before_anything({"plan", "--model", "tiny-llama"}, {"--grid", "device=h100-sxm,nosuch"},
                               "point device-nosuch (device=nosuch): unknown device 'nosuch'");
  expect_usage_before_anything({"plan", "--model", "tiny-llama"}, {"--grid", "device-memory=80G,12Q"},
                               "--device-memory: unknown size suffix in '12Q'");
  expect_usage_before_anything(cat(kEverySubcommand[2], {"--model", "tiny-llama"}), {"--grid", "memory-limit=1Gi,3X"},
                               "point memory-limit3X (memory-limit=3X): --memory-limit: unknown size suffix");
  expect_usage_before_anything({"kv", "--model", "tiny-llama", "--device", "h100-sxm"}, {"--grid", "overhead=1G,lots"},
                               "--overhead: not a size: 'lots'");
  expect_usage_before_anything({"kv", "--model", "tiny-llama", "--device", "h100-sxm", "--length-dist", "100,200"},
                               {"--grid", "percentile=50,0"}, "'0' is outside (0, 100]");
}

TEST(CliSweepInputs, EveryPointRefusedBeforeRunningIsExit2WithNothingWritten) {
  // llama2-7b has 32 heads: neither 3 nor 5 divides them.
  expect_usage_before_anything({"plan", "--model", "llama2-7b"}, {"--grid", "tp=3,5"},
                               "no point can run: plan refuses all 2 (first, point tp3: --tp 3 does not divide heads");
  // --list still lists them (it runs nothing by request).
  const auto l = run_cli({"sweep", "plan", "--model", "llama2-7b", "--grid", "tp=3,5", "--list"});
  EXPECT_EQ(l.status, 0) << l.err;
  EXPECT_TRUE(contains(l.out, "2 points, 0 run, 2 skipped")) << l.out;
}

TEST(CliSweepInputs, EveryPointRefusedAsItsJobStartsIsExit2) {
  // A contiguous cache of 64 tokens per sequence cannot hold a context of 128 or
  // 256: kv refuses each point when it runs (exit 2 without a report).
  const std::string out = scratch_dir("sweep-inputs-late") + "/out";
  const auto r = run_cli({"sweep", "kv", "--model", "tiny-llama", "--device", "h100-sxm", "--kv", "contiguous",
                          "--max-model-len", "64", "--grid", "context=128,256", "--out", out});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "no point ran: the subcommand refused every one")) << r.err;
  const auto index = read_json(out + "/sweep.json");
  EXPECT_EQ(index["summary"]["skipped"], 2);
  EXPECT_EQ(index["summary"]["ok"], 0);
  for (const auto& p : index["points"]) {
    EXPECT_EQ(p["status"], "skipped");
    EXPECT_TRUE(contains(p["reason"].get<std::string>(), "exceeds --max-model-len 64")) << p;
  }
  // One point that fits beside them: the sweep ran something, and skipped the rest.
  const std::string out2 = scratch_dir("sweep-inputs-late") + "/out2";
  const auto ok = run_cli({"sweep", "kv", "--model", "tiny-llama", "--device", "h100-sxm", "--kv", "contiguous",
                           "--max-model-len", "64", "--grid", "context=32,128", "--out", out2});
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_EQ(read_json(out2 + "/sweep.json")["summary"]["ok"], 1);
  // --merge of the refused sweep's folder agrees.
  EXPECT_EQ(run_cli({"sweep", "--merge", out}).status, 2);
}
