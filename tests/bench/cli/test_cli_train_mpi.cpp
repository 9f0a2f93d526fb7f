// End-to-end tests of `gpuledger train` under mpiexec: the test runs
// `mpiexec -n 2 gpuledger train …` itself (the mpiexec path and the Open MPI
// environment are compiled in by tests/bench/CMakeLists.txt) and reads the exit
// status, stdout, stderr and the JSON report. What it covers:
//   - a 2-rank data-parallel run: exit 0, one report of kind "train" gathered on
//     rank 0 with one entry per rank, every account equal to its exact budget,
//     and the gradient all-reduce booked as docs/formulas/comm.md sizes it
//     (P_r worked out here from the preset file and docs/exact-budget.md);
//   - one rank running out of memory INSIDE a step (pipeline stage 0 holds two
//     microbatches in flight, stage 1 one; the memory limit is chosen from
//     `plan --json` so that only stage 0 runs out): the job ends (no hang), with
//     a non-zero status, stderr naming the rank and saying it aborts all ranks,
//     and that rank's report (status "oom", the ledger at the failure);
//   - one rank running out of memory while building its trainer (before the first
//     step; tiny-llama's last stage holds h more parameters than the first): every
//     rank ends, rank 0 reports both ranks, the status is the failing rank's "oom";
//   - a layout that needs more ranks than mpiexec started: exit 2, one message;
//   - expert parallelism (tiny-moe, ep 2 of dp 2): every check passes;
//   - multi-head latent attention (tiny-mla, and without its query latent) on
//     2 ranks under dp 2, tp 2 (with and without sp) and pp 2 trains the same
//     losses as on one rank, every check passing.
// Every mpiexec run has its own deadline (kRunTimeoutS): a hang fails the test
// instead of blocking ctest. Skipped when the binary is built without MPI.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "run_cli.h"

using gpuledger::testing::CliResult;
using gpuledger::testing::read_json;
using gpuledger::testing::run_cli;
using gpuledger::testing::scratch_dir;
using nlohmann::json;

namespace {

#if GPULEDGER_HAVE_MPI && defined(GPULEDGER_MPIEXEC)
constexpr int kRunTimeoutS = 120;  // one mpiexec run; a 2-rank tiny run takes a few seconds

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

struct MpiResult : CliResult {
  bool timed_out = false;
  double seconds = 0;
};

// `mpiexec -n np gpuledger args…` in its own process group, stdout and stderr to
// files; ended (with its ranks) after kRunTimeoutS.
MpiResult run_mpi(int np, const std::vector<std::string>& args) {
  static int counter = 0;
  const std::string dir = scratch_dir("mpi-io");
  const std::string out_path = dir + "/out" + std::to_string(counter) + ".txt";
  const std::string err_path = dir + "/err" + std::to_string(counter++) + ".txt";
  std::vector<std::string> argv_s = {GPULEDGER_MPIEXEC, "-n", std::to_string(np), "--oversubscribe", GPULEDGER_BIN};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    setpgid(0, 0);
    // GPL_MPI_ENV (cmake/GpuledgerTesting.cmake): root allowed, oversubscribed,
    // shared-memory transport, one thread per rank. ctest sets it too; this lets
    // the binary run by hand.
    std::istringstream env(GPULEDGER_MPI_ENV);
    for (std::string kv; env >> kv;) {
      const auto eq = kv.find('=');
      if (eq != std::string::npos) setenv(kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str(), 0);
    }
    if (!freopen(out_path.c_str(), "w", stdout) || !freopen(err_path.c_str(), "w", stderr)) _exit(127);
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv_s[0].c_str(), argv.data());
    _exit(127);
  }
  setpgid(pid, pid);
  MpiResult r;
  int wstatus = 0;
  for (;;) {
    const pid_t done = waitpid(pid, &wstatus, WNOHANG);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(kRunTimeoutS)) {
      // Open MPI starts each rank in a process group of its own: SIGTERM to
      // mpiexec makes it end its ranks; SIGKILL after 10 s if it does not.
      r.timed_out = true;
      kill(pid, SIGTERM);
      bool reaped = false;
      for (int i = 0; i < 200 && !(reaped = waitpid(pid, &wstatus, WNOHANG) == pid); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (!reaped) {
        kill(-pid, SIGKILL);
        waitpid(pid, &wstatus, 0);
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  return r;
}

// ---- the worked figures: docs/exact-budget.md "Parameters held by a rank" ----

json preset(const std::string& name) {
  return read_json(std::string(GPULEDGER_SOURCE_DIR) + "/models/presets/" + name + ".json");
}

// P_r of a gpt preset on one rank of tp 1, pp 1 (V' = V at t = 1): the embedding
// unit (V·h words + max_seq·h positions), each layer (norm 1 2h, QKV h·(a·d+2k·d)
// + bias a·d+2k·d, attention-out a·d·h + h, norm 2 2h, MLP in h·f + f, MLP out
// f·h + h), the head unit (final norm 2h; tied, so no projection).
int64_t gpt_rank_params(const json& m) {
  const int64_t h = m["hidden"], a = m["heads"], k = m["kv_heads"], d = m["head_dim"], f = m["ffn"];
  const int64_t V = m["vocab"], S = m["max_seq"], L = m["layers"];
  EXPECT_TRUE(m["tied_embeddings"].get<bool>());
  EXPECT_TRUE(m["qkv_bias"].get<bool>());
  const int64_t qkv = a * d + 2 * k * d;
  const int64_t layer = 2 * h + h * qkv + qkv + a * d * h + h + 2 * h + h * f + f + f * h + h;
  return V * h + S * h + L * layer + 2 * h;
}

// Per-rank exact budgets of a layout from `gpuledger plan --ranks all --json -`.
json plan_ranks(const std::vector<std::string>& args) {
  std::vector<std::string> a = {"plan", "--ranks", "all", "--json", "-"};
  a.insert(a.end(), args.begin(), args.end());
  const auto r = run_cli(a);
  EXPECT_EQ(r.status, 0) << r.err;
  return r.json()["ranks"];
}

int64_t model_states(const json& exact) {
  return exact["weights"].get<int64_t>() + exact["grads"].get<int64_t>() + exact["master"].get<int64_t>() +
         exact["optim"].get<int64_t>();
}

// ---- 1. two data-parallel ranks: one gathered report, exact bytes, the all-reduce ----
TEST(CliTrainMpi, DataParallelReportHasEveryRankAndTheGradientAllReduce) {
  const std::string path = scratch_dir("dp2") + "/dp2.json";
  const int64_t steps = 2;
  const double bucket_mb = 0.1;
  const auto r = run_mpi(2, {"train", "--model", "tiny-gpt", "--seq", "32", "--mbs", "2", "--dp", "2", "--steps",
                             std::to_string(steps), "--bucket-mb", "0.1", "--json", path});
  ASSERT_FALSE(r.timed_out) << r.err;
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  const auto doc = read_json(path);
  EXPECT_EQ(doc["kind"], "train");
  EXPECT_EQ(doc["status"], "ok");
  EXPECT_EQ(doc["env"]["world"], 2);
  ASSERT_EQ(doc["ranks"].size(), 2u);
  for (const auto& c : doc["checks"]) EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
  EXPECT_EQ(doc["summary"]["loss"].size(), static_cast<size_t>(steps));
  // Both ranks' peaks add up (each measured on its own cores); the hardware peak covers
  // the host's CPUs the ranks may run on, and is never below the measured one.
  const auto& sum = doc["summary"];
  EXPECT_EQ(sum["peak_devices"], 2);
  ASSERT_TRUE(sum["hardware_peak_flops"].is_number()) << sum["hardware_peak_source"];
  EXPECT_NE(sum["hardware_peak_source"].get<std::string>().find("1 host(s)"), std::string::npos)
      << sum["hardware_peak_source"];
  EXPECT_GE(sum["hardware_peak_flops"].get<double>(), sum["peak_flops"].get<double>() * 2);

  // bf16 (the default): gradients g = 2 bytes; buckets of ⌊bucket_mb·2²⁰/g⌋ elements.
  const int64_t P_r = gpt_rank_params(preset("tiny-gpt"));
  ASSERT_EQ(P_r, 110400);                  // by hand: 97·64 + 64·64 + 2·49984 + 128
  EXPECT_EQ(doc["params"]["total"], P_r);  // t = 1, tied counted once: Ψ = P_r
  const int64_t g = 2;
  const auto bucket_elems = static_cast<int64_t>(std::floor(bucket_mb * 1048576.0 / g));
  const int64_t buckets = (P_r + bucket_elems - 1) / bucket_elems;
  ASSERT_EQ(buckets, 3);  // 110400 / 52428 → 3 buckets, so the bucketing is exercised
  // Per step: the buckets (P_r·g bytes) + the loss (4 bytes); ZeRO 0 clips without a dp call.
  const int64_t calls_per_step = buckets + 1, bytes_per_step = P_r * g + 4;

  for (int64_t i = 0; i < 2; ++i) {
    const auto& rank = doc["ranks"][i];
    EXPECT_EQ(rank["rank"], i);
    EXPECT_EQ(rank["coords"]["dp"], i);
    EXPECT_EQ(rank["status"], "ok");
    for (auto a : {"weights", "grads", "master", "optim", "activations", "kv", "comm"})
      EXPECT_EQ(rank["measured"]["peak_by_account"][a], rank["analytic"]["exact"][a]) << "rank " << i << " " << a;
    EXPECT_EQ(rank["flops"]["executed_per_step"], rank["flops"]["analytic_hardware"]);
    const auto& analytic = rank["analytic"]["comm"]["all_reduce@dp"];
    EXPECT_EQ(analytic["calls"], calls_per_step);
    EXPECT_EQ(analytic["bytes"], bytes_per_step);
    // The counters hold every step, the warm-up included.
    const auto& measured = rank["comm"]["all_reduce@dp"];
    EXPECT_EQ(measured["calls"], steps * calls_per_step);
    EXPECT_EQ(measured["bytes"], steps * bytes_per_step);
    EXPECT_GT(measured["seconds"].get<double>(), 0.0);
    EXPECT_EQ(rank["comm"].size(), 1u) << rank["comm"].dump();  // dp only: no tp/pp/emb traffic
  }
  // The table is printed once, by rank 0.
  EXPECT_EQ(count_of(r.out, "# layout"), 1u) << r.out;
}

// ---- 2. out of memory inside a step on one rank: the job is aborted, no hang ----
// Expert parallelism on 2 real ranks (cpu, tiny-moe, ep 2 of dp 2): every
// check passes (each rank holds 2 of the 4 experts: every account equals its
// exact budget), and per step each rank makes 4 all-to-alls per layer per
// microbatch over ep (2 layers, 2 microbatches: 16) and no expert-data-parallel
// call (its group is one rank).
TEST(CliTrainMpi, ExpertParallelPassesEveryCheck) {
  const std::string path = scratch_dir("ep2") + "/ep2.json";
  const int64_t steps = 2;
  const auto r = run_mpi(2, {"train", "--model", "tiny-moe", "--seq", "16", "--mbs", "2", "--microbatches", "2", "--dp",
                             "2", "--ep", "2", "--steps", std::to_string(steps), "--json", path});
  ASSERT_FALSE(r.timed_out) << r.err;
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  const auto doc = read_json(path);
  EXPECT_EQ(doc["config"]["layout"]["ep"], 2);
  ASSERT_EQ(doc["ranks"].size(), 2u);
  for (const auto& c : doc["checks"]) EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
  for (const auto& rank : doc["ranks"]) {
    for (auto a : {"weights", "grads", "master", "optim", "activations", "comm"})
      EXPECT_EQ(rank["measured"]["peak_by_account"][a], rank["analytic"]["exact"][a]) << a;
    EXPECT_EQ(rank["analytic"]["comm"]["all_to_all@ep"]["calls"], 16);
    EXPECT_EQ(rank["comm"]["all_to_all@ep"]["calls"], steps * 16);
    EXPECT_FALSE(rank["comm"].contains("all_reduce@edp"));
  }
}

TEST(CliTrainMpi, OutOfMemoryInsideAStepOnOneRankEndsTheJob) {
  // 8 layers (4 per stage) so that activations outweigh the workspace: 1F1B keeps
  // 2 microbatches in flight on stage 0, 1 on stage 1.
  const std::vector<std::string> point = {"--model", "tiny-gpt", "--layers", "8", "--seq",          "64",
                                          "--mbs",   "4",        "--pp",     "2", "--microbatches", "4"};
  const auto ranks = plan_ranks(point);
  ASSERT_EQ(ranks.size(), 2u);
  ASSERT_EQ(ranks[0]["in_flight_microbatches"], 2);
  ASSERT_EQ(ranks[1]["in_flight_microbatches"], 1);
  const auto& e0 = ranks[0]["analytic"]["exact"];
  const auto& e1 = ranks[1]["analytic"]["exact"];
  // Stage 0 needs at least its model states and all its activations at once (both
  // live at the activations' peak); stage 1 needs at most its budget total (the
  // sum of every account's peak, the workspace bound included).
  const int64_t stage0_at_least = model_states(e0) + e0["activations"].get<int64_t>();
  const int64_t stage1_at_most = e1["total"].get<int64_t>();
  ASSERT_GT(stage0_at_least, stage1_at_most);
  const int64_t limit = (stage0_at_least + stage1_at_most) / 2;
  // Stage 0 builds its trainer (model states and the p2p buffers) within the limit.
  ASSERT_LT(model_states(e0) + e0["comm"].get<int64_t>(), limit);

  const std::string path = scratch_dir("midstep") + "/midstep.json";
  std::vector<std::string> args = {"train", "--steps", "2", "--memory-limit", std::to_string(limit), "--json", path};
  args.insert(args.end(), point.begin(), point.end());
  const auto r = run_mpi(2, args);
  ASSERT_FALSE(r.timed_out) << "the job hung: " << r.err;
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("rank 0 failed during step 0"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("aborting all ranks"), std::string::npos) << r.err;
  EXPECT_EQ(count_of(r.err, "aborting all ranks"), 1u) << r.err;

  ASSERT_TRUE(std::filesystem::exists(path)) << r.err;
  const auto doc = read_json(path);
  EXPECT_EQ(doc["kind"], "train");
  EXPECT_EQ(doc["status"], "oom");
  EXPECT_EQ(doc["error"].get<std::string>().rfind("rank 0: ", 0), 0u) << doc["error"];
  ASSERT_EQ(doc["ranks"].size(), 1u);  // what the failing rank knows: its own record
  const auto& rank = doc["ranks"][0];
  EXPECT_EQ(rank["rank"], 0);
  EXPECT_EQ(rank["status"], "oom");
  EXPECT_EQ(rank["measured"]["limit_bytes"], limit);
  const auto& at = rank["measured"]["at_failure"];
  const int64_t live = at["live_total"], refused = at["refused_bytes"];
  EXPECT_LE(live, limit);
  EXPECT_GT(live + refused, limit);
  // Inside the step: the model states are all live, and some activations are held.
  for (auto a : {"weights", "grads", "master", "optim"}) EXPECT_EQ(at["live"][a], e0[a]) << a;
  EXPECT_GT(at["live"]["activations"].get<int64_t>(), 0);
  EXPECT_LE(at["live"]["activations"].get<int64_t>(), e0["activations"].get<int64_t>());
  EXPECT_TRUE(doc.contains("suggestions"));
}

// ---- 3. out of memory before the first step on one rank: agreed, rank 0 reports ----
TEST(CliTrainMpi, OutOfMemoryBuildingTheTrainerOnOneRankIsReportedByRankZero) {
  // tiny-llama is untied: the last stage holds the final norm (h) more than the first.
  const std::vector<std::string> point = {"--model", "tiny-llama", "--seq",          "32", "--mbs", "2",
                                          "--pp",    "2",          "--microbatches", "2"};
  const auto ranks = plan_ranks(point);
  ASSERT_EQ(ranks.size(), 2u);
  // Building the trainer allocates the model states and the p2p buffers (comm).
  const int64_t setup0 =
      model_states(ranks[0]["analytic"]["exact"]) + ranks[0]["analytic"]["exact"]["comm"].get<int64_t>();
  const int64_t setup1 =
      model_states(ranks[1]["analytic"]["exact"]) + ranks[1]["analytic"]["exact"]["comm"].get<int64_t>();
  ASSERT_EQ(setup1 - setup0, 16 * 64);  // h = 64 more parameters at 2+2+4+8 bytes each (bf16, AdamW)
  const int64_t limit = (setup0 + setup1) / 2;

  const std::string path = scratch_dir("setup") + "/setup.json";
  std::vector<std::string> args = {"train", "--steps", "2", "--memory-limit", std::to_string(limit), "--json", path};
  args.insert(args.end(), point.begin(), point.end());
  const auto r = run_mpi(2, args);
  ASSERT_FALSE(r.timed_out) << "the job hung: " << r.err;
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(r.err.find("aborting"), std::string::npos) << r.err;  // agreed, not aborted

  ASSERT_TRUE(std::filesystem::exists(path)) << r.err;
  const auto doc = read_json(path);
  EXPECT_EQ(doc["status"], "oom");
  EXPECT_EQ(doc["error"].get<std::string>().rfind("rank 1: ", 0), 0u) << doc["error"];
  ASSERT_EQ(doc["ranks"].size(), 2u);  // rank 0 gathered both
  EXPECT_EQ(doc["summary"]["steps_completed"], 0);
  const auto& r0 = doc["ranks"][0];
  const auto& r1 = doc["ranks"][1];
  EXPECT_EQ(r0["rank"], 0);
  EXPECT_EQ(r0["status"], "error");
  EXPECT_NE(r0["error"].get<std::string>().find("not run: rank 1 failed"), std::string::npos) << r0["error"];
  EXPECT_EQ(r1["rank"], 1);
  EXPECT_EQ(r1["status"], "oom");
  const auto& at = r1["measured"]["at_failure"];
  EXPECT_LE(at["live_total"].get<int64_t>(), limit);
  EXPECT_GT(at["live_total"].get<int64_t>() + at["refused_bytes"].get<int64_t>(), limit);
  EXPECT_EQ(at["live"]["activations"], 0);  // no step started
  // What would fit is worked out for the rank that ran out.
  EXPECT_TRUE(doc.contains("suggestions"));
  // The summary is printed once, by rank 0.
  EXPECT_EQ(count_of(r.out, "# FAILED (oom)"), 1u) << r.out;
}

// ---- 4. a layout the job cannot hold: a usage error, printed once ----
TEST(CliTrainMpi, LayoutLargerThanTheJobIsAUsageErrorPrintedOnce) {
  const auto r = run_mpi(2, {"train", "--model", "tiny-gpt", "--seq", "32", "--dp", "4", "--steps", "1"});
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(count_of(r.err, "gpuledger train: error"), 1u) << r.err;
  EXPECT_NE(r.err.find("mpirun -np 2 but the layout needs dp·tp·pp = 4·1·1 = 4"), std::string::npos) << r.err;
}

// ---- 5. context parallelism: a ring of two ranks, every account and the ring traffic exact ----
// tiny-llama, --cp 2 --seq 64 --mbs 1, bf16: each rank holds 32 tokens, its
// K/V block is B_kv = 2·b·(s/cp)·k·d·e = 2·1·32·2·16·2 = 4096 bytes. Per step
// and layer (2 layers, 1 microbatch): the forward sends one block (cp − 1), the
// backward two messages (cp) of 2·(cp − 1)·B_kv bytes in all: send@cp and
// recv@cp 2·(1 + 2) = 6 calls, 2·3·4096 = 24576 bytes per step; the comm
// account holds the ring's 4·B_kv = 16384 bytes.
TEST(CliTrainMpi, ContextParallelRingIsBookedAsItsBudget) {
  const std::string path = scratch_dir("cp2") + "/cp2.json";
  const int64_t steps = 2;
  const auto r = run_mpi(2, {"train", "--model", "tiny-llama", "--cp", "2", "--seq", "64", "--attention", "flash",
                             "--steps", std::to_string(steps), "--json", path});
  ASSERT_FALSE(r.timed_out) << r.err;
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  const auto doc = read_json(path);
  EXPECT_EQ(doc["status"], "ok");
  ASSERT_EQ(doc["ranks"].size(), 2u);
  for (const auto& c : doc["checks"]) EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
  for (int64_t i = 0; i < 2; ++i) {
    const auto& rank = doc["ranks"][i];
    EXPECT_EQ(rank["coords"].value("cp", int64_t{0}), i);  // written off the ring's first rank only
    for (auto a : {"weights", "grads", "master", "optim", "activations", "kv", "comm"})
      EXPECT_EQ(rank["measured"]["peak_by_account"][a], rank["analytic"]["exact"][a]) << "rank " << i << " " << a;
    EXPECT_EQ(rank["flops"]["executed_per_step"], rank["flops"]["analytic_hardware"]);
    for (auto key : {"send@cp", "recv@cp"}) {
      EXPECT_EQ(rank["analytic"]["comm"][key]["calls"], 6) << key;
      EXPECT_EQ(rank["analytic"]["comm"][key]["bytes"], 24576) << key;
      EXPECT_EQ(rank["comm"][key]["calls"], steps * 6) << key;
      EXPECT_EQ(rank["comm"][key]["bytes"], steps * 24576) << key;
    }
    // The gradients are averaged over the data-parallel group with cp (dp·cp = 2
    // ranks): its all-reduce's busbw factor is 2(n − 1)/n = 1 (core/collective.h).
    EXPECT_EQ(rank["comm_bandwidth"]["all_reduce@dp"]["group_size"], 2);
    EXPECT_EQ(rank["comm_bandwidth"]["all_reduce@dp"]["busbw_factor"], 1.0);
  }
  // The printed table agrees with the JSON: at factor 1 each all_reduce@dp
  // row's busbw equals its algbw (its last two cells, "<value> <unit>" each).
  size_t rows = 0;
  std::istringstream table(r.out + r.err);
  for (std::string line; std::getline(table, line);) {
    if (line.rfind("  all_reduce@dp ", 0) != 0) continue;
    std::vector<std::string> cells;
    std::istringstream words(line);
    for (std::string w; words >> w;) cells.push_back(w);
    ASSERT_GE(cells.size(), 5u) << line;
    const size_t n = cells.size();
    EXPECT_EQ(cells[n - 4] + " " + cells[n - 3], cells[n - 2] + " " + cells[n - 1]) << line;
    ++rows;
  }
  EXPECT_GE(rows, 1u) << r.out << r.err;
}

// ---- 6. a trace of a measured 2-stage pipeline run ----
// tiny-llama, pp 2, 2 microbatches, 2 steps, --trace: one Chrome trace with a
// process per rank and a thread per stream; every slice a complete event with
// ph/ts/dur/pid/tid; each rank's op slices carry every FLOP it executed (2
// steps' worth: the set-up runs no FLOP-counting op) and its comm slices every
// collective it booked.
TEST(CliTrainMpi, TraceOfAPipelineRunHoldsEveryOpAndCollective) {
  const std::string dir = scratch_dir("trace-pp2");
  const int64_t steps = 2;
  const auto r =
      run_mpi(2, {"train", "--model", "tiny-llama", "--pp", "2", "--seq", "32", "--mbs", "2", "--microbatches", "2",
                  "--steps", std::to_string(steps), "--trace", dir + "/trace.json", "--json", dir + "/report.json"});
  ASSERT_FALSE(r.timed_out) << r.err;
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  const auto doc = read_json(dir + "/report.json");
  const auto trace = read_json(dir + "/trace.json");
  ASSERT_TRUE(trace["traceEvents"].is_array());
  EXPECT_EQ(trace["otherData"]["slices_dropped"], 0);
  std::map<int64_t, std::map<int64_t, std::string>> threads;  // pid -> tid -> stream
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name") threads[e["pid"]][e["tid"]] = e["args"]["name"];
  ASSERT_EQ(threads.size(), 2u);
  std::map<int64_t, int64_t> flops, sends;
  size_t slices = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    ++slices;
    for (auto k : {"ts", "dur"}) ASSERT_TRUE(e.contains(k) && e[k].is_number()) << e.dump();
    for (auto k : {"pid", "tid"}) ASSERT_TRUE(e.contains(k) && e[k].is_number_integer()) << e.dump();
    EXPECT_GE(e["ts"].get<double>(), 0.0);
    EXPECT_GE(e["dur"].get<double>(), 0.0);
    const int64_t pid = e["pid"];
    ASSERT_TRUE(threads[pid].count(e["tid"].get<int64_t>())) << e.dump();
    EXPECT_EQ(threads[pid][e["tid"].get<int64_t>()], e["cat"]) << e.dump();
    flops[pid] += e["args"].value("flops", int64_t{0});
    if (e["cat"] == "comm pp" && e["name"] == "send") ++sends[pid];
  }
  EXPECT_GT(slices, 100u);
  for (const auto& rank : doc["ranks"]) {
    const int64_t pid = rank["rank"];
    EXPECT_EQ(threads[pid][0], "compute");
    EXPECT_EQ(flops[pid], steps * rank["flops"]["executed_per_step"].get<int64_t>()) << pid;
    EXPECT_EQ(sends[pid], rank["comm"]["send@pp"]["calls"].get<int64_t>()) << pid;
  }
}

// ---- multi-head latent attention: the losses of one rank on two ----
// fp32, 3 steps of a global batch of 4 sequences; the two-rank runs sum in
// another order (tp partial sums, dp gradient sums), so the losses agree to
// 1e-5 relative, not bitwise. Under tp the down projections' and latent norms'
// gradients are partial sums over the heads (mla_attention.h): a missing sum
// would train another model and the losses would part after the first step.
TEST(CliTrainMpi, MultiHeadLatentAttentionOnTwoRanksTrainsTheLossesOfOne) {
  const std::string direct = std::string(GPULEDGER_SOURCE_DIR) + "/tests/data/tiny_mla_direct_query.json";
  for (const std::string& model : {std::string("tiny-mla"), direct}) {
    SCOPED_TRACE(model);
    const std::vector<std::string> base = {"train", "--model", model,     "--seq", "16",      "--gbs", "4",
                                           "--mbs", "2",       "--dtype", "fp32",  "--steps", "3"};
    auto one = base;
    one.insert(one.end(), {"--json", "-"});
    const auto r1 = run_cli(one);
    ASSERT_EQ(r1.status, 0) << r1.err;
    const auto ref = r1.json()["summary"]["loss"];
    ASSERT_EQ(ref.size(), 3u);
    for (const std::vector<std::string>& layout : {std::vector<std::string>{"--dp", "2"},
                                                   {"--tp", "2"},
                                                   {"--tp", "2", "--sp", "--recompute", "selective"},
                                                   {"--pp", "2", "--recompute", "full"}}) {
      const std::string path = scratch_dir("mla2") + "/mla.json";
      auto args = base;
      args.insert(args.end(), layout.begin(), layout.end());
      args.insert(args.end(), {"--json", path});
      const auto r = run_mpi(2, args);
      ASSERT_FALSE(r.timed_out) << r.err;
      ASSERT_EQ(r.status, 0) << layout[0] << ": " << r.err << r.out;
      const auto doc = read_json(path);
      for (const auto& c : doc["checks"]) EXPECT_TRUE(c["ok"].get<bool>()) << layout[0] << ": " << c.dump();
      const auto loss = doc["summary"]["loss"];
      ASSERT_EQ(loss.size(), ref.size());
      for (size_t i = 0; i < ref.size(); ++i)
        EXPECT_NEAR(loss[i].get<double>(), ref[i].get<double>(), 1e-5 * std::abs(ref[i].get<double>()))
            << layout[0] << " " << layout[1] << ", step " << i;
    }
  }
}

#else
TEST(CliTrainMpi, SkippedWithoutMpi) { GTEST_SKIP() << "gpuledger built without MPI (or no mpiexec)"; }
#endif

}  // namespace
