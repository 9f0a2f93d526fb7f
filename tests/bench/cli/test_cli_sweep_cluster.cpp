// CLI tests of the sweep on a cluster (docs/cluster.md): layout=auto's exact
// point list, --list/--point/SLURM_ARRAY_TASK_ID and --merge for job arrays,
// --resume rerunning exactly the missing points, the CSV's columns and types,
// the child launch's environment, and (sweep_oom_mpi ctest, under mpiexec) a
// point that runs out of memory on one rank in the middle of a step ending
// that point only.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench/cli/sweep_launch.h"
#include "bench/report/sweep_csv.h"
#include "run_cli.h"

using gpuledger::testing::contains;
using gpuledger::testing::read_json;
using gpuledger::testing::run_cli;
using gpuledger::testing::scratch_dir;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cell;
  std::istringstream in(s);
  while (std::getline(in, cell, sep)) out.push_back(cell);
  if (!s.empty() && s.back() == sep) out.push_back("");
  return out;
}

// The names of the points a sweep's progress says it ran ("[k/n] ... ok (...)").
std::vector<std::string> ran(const std::string& err) {
  std::vector<std::string> out;
  for (const auto& l : lines(err))
    if (l.rfind("[", 0) == 0 && contains(l, "] "))
      out.push_back(l.substr(l.find("] ") + 2, l.find(" ...") - l.find("] ") - 2));
  return out;
}

// A line of --list: the index, the name, whether it runs.
std::string fmt_line(size_t i, const std::string& name) { return fmt::format("{:>4}  {:<40} runs", i, name); }

// tiny-llama: 2 layers, 4 heads, 2 KV heads, ffn 176, vocab 97; one step on the meta backend.
const std::vector<std::string> kMetaTrain = {"--model",        "tiny-llama", "--backend", "meta", "--steps", "1",
                                             "--warmup",       "0",          "--seq",     "16",   "--mbs",   "1",
                                             "--microbatches", "2"};

TEST(SweepCluster, LayoutAutoIsEveryFactorisationTheModelAllows) {
  // World 4: (dp, tp, pp) = (4,1,1) (2,1,2) (1,1,4) (2,2,1) (1,2,2) (1,4,1), tp slowest;
  // pp 4 exceeds tiny-llama's 2 layers; tp 4 replicates its 2 KV heads (allowed).
  auto r = run_cli(cat(cat({"sweep", "train"}, kMetaTrain), {"--world", "4", "--grid", "layout=auto", "--list"}));
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<std::string> want = {"dp4_tp1_pp1", "dp2_tp1_pp2", "dp2_tp2_pp1", "dp1_tp2_pp2", "dp1_tp4_pp1"};
  const auto out = lines(r.out);
  ASSERT_GE(out.size(), want.size() + 2) << r.out;
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(out[i], fmt_line(i, want[i])) << r.out;
  EXPECT_TRUE(contains(r.out, "layout=auto leaves out dp 1 tp 1 pp 4: --pp 4 exceeds layers 2")) << r.out;
  EXPECT_TRUE(contains(r.out, "5 points, 5 run, 0 skipped")) << r.out;

  // A filter beside it, the product with another axis, and --np for the world on a real backend.
  auto f = run_cli({"sweep", "train", "--model", "tiny-llama", "--np", "4", "--grid", "layout=auto", "--grid", "tp=1,2",
                    "--grid", "zero=0,3", "--list"});
  ASSERT_EQ(f.status, 0) << f.err;
  const std::vector<std::string> filtered = {"dp4_tp1_pp1_zero0", "dp4_tp1_pp1_zero3", "dp2_tp1_pp2_zero0",
                                             "dp2_tp1_pp2_zero3", "dp2_tp2_pp1_zero0", "dp2_tp2_pp1_zero3",
                                             "dp1_tp2_pp2_zero0", "dp1_tp2_pp2_zero3"};
  const auto fl = lines(f.out);
  for (size_t i = 0; i < filtered.size(); ++i) EXPECT_EQ(fl[i], fmt_line(i, filtered[i])) << f.out;
  EXPECT_TRUE(contains(f.out, "8 points, 8 run, 0 skipped")) << f.out;

  // layout=auto with no world to factorise, or with --tp fixed: usage errors.
  EXPECT_EQ(run_cli({"sweep", "train", "--model", "tiny-llama", "--grid", "layout=auto", "--list"}).status, 2);
  EXPECT_EQ(
      run_cli({"sweep", "train", "--model", "tiny-llama", "--np", "4", "--tp", "2", "--grid", "layout=auto", "--list"})
          .status,
      2);
}

TEST(SweepCluster, ListPointAndArrayTaskThenMerge) {
  const std::string out = scratch_dir("sweep-array");
  const auto base = cat(cat({"sweep", "train"}, kMetaTrain),
                        {"--world", "2", "--grid", "layout=auto", "--grid", "recompute=none,full", "--out", out});
  // World 2 on 2 layers: dp2_tp1_pp1, dp1_tp1_pp2, dp1_tp2_pp1, times two recompute values.
  auto l = run_cli(cat(base, {"--list"}));
  ASSERT_EQ(l.status, 0) << l.err;
  EXPECT_TRUE(contains(l.out, "   3  dp1_tp1_pp2_recompute-full")) << l.out;
  EXPECT_TRUE(contains(l.out, "6 points, 6 run, 0 skipped (a job array: --array=0-5)")) << l.out;
  EXPECT_FALSE(fs::exists(out + "/sweep.plan.json"));  // --list runs and writes nothing

  auto one = run_cli(cat(base, {"--point", "3"}));
  ASSERT_EQ(one.status, 0) << one.err;
  EXPECT_EQ(ran(one.err), std::vector<std::string>{"dp=1 tp=1 pp=2 recompute=full"}) << one.err;
  EXPECT_TRUE(fs::exists(out + "/dp1_tp1_pp2_recompute-full.json"));
  EXPECT_FALSE(fs::exists(out + "/dp2_tp1_pp1_recompute-none.json"));
  EXPECT_FALSE(fs::exists(out + "/sweep.json"));  // one task of an array leaves the index to --merge

  // Merged now: one point done, five missing (exit 1).
  auto m = run_cli({"sweep", "--merge", out});
  EXPECT_EQ(m.status, 1) << m.err;
  EXPECT_EQ(read_json(out + "/sweep.json")["summary"]["missing"], 5);

  // The other tasks, as a Slurm job array runs them.
  for (int task : {0, 1, 2, 4, 5}) {
    setenv("SLURM_ARRAY_TASK_ID", std::to_string(task).c_str(), 1);
    auto t = run_cli(base);
    unsetenv("SLURM_ARRAY_TASK_ID");
    ASSERT_EQ(t.status, 0) << t.err;
    EXPECT_EQ(ran(t.err).size(), 1u) << t.err;
  }
  auto all = run_cli({"sweep", "--merge", out});
  EXPECT_EQ(all.status, 0) << all.err;
  const json index = read_json(out + "/sweep.json");
  EXPECT_EQ(index["summary"]["ok"], 6);
  EXPECT_EQ(index["summary"]["complete"], true);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(index["points"][i]["index"], i);
  EXPECT_EQ(index["points"][3]["name"], "dp1_tp1_pp2_recompute-full");
  EXPECT_TRUE(fs::exists(out + "/sweep.csv"));
  // A point that does not exist: usage.
  EXPECT_EQ(run_cli(cat(base, {"--point", "6"})).status, 2);
}

TEST(SweepCluster, ResumeRerunsOnlyTheMissingPoints) {
  const std::string out = scratch_dir("sweep-resume");
  const std::vector<std::string> args = {"sweep",  "plan",           "--model", "llama2-7b", "--seq",
                                         "4096",   "--microbatches", "8",       "--grid",    "tp=1,2,4",
                                         "--grid", "pp=1,2",         "--out",   out};
  auto first = run_cli(args);
  ASSERT_EQ(first.status, 0) << first.err;
  EXPECT_EQ(ran(first.err).size(), 6u) << first.err;
  // A kill part-way loses a point's report (and its entry, written last).
  fs::remove(out + "/tp2_pp1.json");
  fs::remove(out + "/tp4_pp2.point.json");
  auto again = run_cli(cat(args, {"--resume"}));
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_EQ(ran(again.err), (std::vector<std::string>{"tp=2 pp=1", "tp=4 pp=2"})) << again.err;
  EXPECT_TRUE(contains(again.err, "2 to run, 0 skipped (the subcommand refuses them), 4 done already")) << again.err;
  EXPECT_EQ(read_json(out + "/sweep.json")["summary"]["ok"], 6);
  // Other options are another configuration: every point runs again.
  auto changed = args;
  changed[5] = "2048";
  auto other = run_cli(cat(changed, {"--resume"}));
  ASSERT_EQ(other.status, 0) << other.err;
  EXPECT_EQ(ran(other.err).size(), 6u) << other.err;
}

TEST(SweepCluster, CsvHasOneTypedRowPerPoint) {
  const std::string out = scratch_dir("sweep-csv");
  auto r = run_cli(cat(cat({"sweep", "train"}, kMetaTrain), {"--world", "2", "--ranks", "all", "--grid", "layout=auto",
                                                             "--grid", "recompute=none,full", "--out", out}));
  ASSERT_EQ(r.status, 0) << r.err;
  std::ifstream in(out + "/sweep.csv");
  std::stringstream ss;
  ss << in.rdbuf();
  const auto rows = lines(ss.str());
  ASSERT_EQ(rows.size(), 7u) << ss.str();
  EXPECT_EQ(rows[0],
            "index,name,dp,tp,pp,recompute,status,peak_bytes_first_stage,peak_bytes_middle_stages,"
            "peak_bytes_last_stage,peak_bytes,budget_peak_bytes,tokens_per_s,mfu,hfu,step_ms,checks_failed,loss,"
            "seconds,reason");
  const json index = read_json(out + "/sweep.json");
  for (size_t i = 1; i < rows.size(); ++i) {
    const auto c = split(rows[i], ',');
    ASSERT_EQ(c.size(), 20u) << rows[i];
    const json& p = index["points"][i - 1];
    EXPECT_EQ(c[0], std::to_string(i - 1));
    EXPECT_EQ(c[1], p["name"]);
    EXPECT_EQ(c[2], p["values"]["dp"]);  // numbers unquoted, as typed
    EXPECT_TRUE(c[5] == "none" || c[5] == "full") << rows[i];
    EXPECT_EQ(c[6], "ok");
    const json doc = read_json(out + "/" + p["name"].get<std::string>() + ".json");
    int64_t first = 0, last = 0, most = 0;
    const int64_t stages = doc["config"]["layout"]["pp"];
    for (const auto& rk : doc["ranks"]) {
      const int64_t peak = rk["measured"]["peak_bytes"];
      if (rk["coords"]["pp"] == 0) first = std::max(first, peak);
      if (rk["coords"]["pp"] == stages - 1) last = std::max(last, peak);
      most = std::max(most, peak);
    }
    EXPECT_EQ(c[7], std::to_string(first)) << rows[i];
    EXPECT_EQ(c[8], "") << rows[i];  // no middle stage with at most 2 stages
    EXPECT_EQ(c[9], std::to_string(last)) << rows[i];
    EXPECT_EQ(c[10], std::to_string(most)) << rows[i];
    EXPECT_EQ(c[16], "0") << rows[i];  // checks failed
    EXPECT_DOUBLE_EQ(std::stod(c[17]), doc["summary"]["loss"].back().get<double>()) << rows[i];
  }
  // The cell rules on their own.
  using gpuledger::report::csv_cell;
  using gpuledger::report::typed_value;
  EXPECT_EQ(typed_value("2"), json(2));
  EXPECT_EQ(typed_value("0.5"), json(0.5));
  EXPECT_EQ(typed_value("1Gi"), json("1Gi"));
  EXPECT_EQ(typed_value("full"), json("full"));
  EXPECT_EQ(csv_cell(json("a,b")), "\"a,b\"");
  EXPECT_EQ(csv_cell(json("say \"x\"")), "\"say \"\"x\"\"\"");
  EXPECT_EQ(csv_cell(json(nullptr)), "");
}

TEST(SweepCluster, AChildLaunchIsAJobOfItsOwn) {
  using gpuledger::cli::child_command;
  using gpuledger::cli::is_launcher_variable;
  // The parent job's description of this process goes; the user's settings stay.
  for (const char* v :
       {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_MCA_orte_hnp_uri", "OMPI_MCA_ess", "OMPI_MCA_pmix",
        "OMPI_FILE_LOCATION", "PMIX_RANK", "PMIX_NAMESPACE", "PMI_RANK", "PMI_FD", "SLURM_PROCID", "SLURM_LOCALID"})
    EXPECT_TRUE(is_launcher_variable(v)) << v;
  for (const char* v :
       {"OMPI_MCA_rmaps_base_oversubscribe", "OMPI_MCA_btl", "OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM",
        "PMIX_MCA_gds", "SLURM_JOB_ID", "SLURM_NTASKS", "PATH", "CUDA_VISIBLE_DEVICES"})
    EXPECT_FALSE(is_launcher_variable(v)) << v;
  EXPECT_EQ(child_command("mpirun -np {ranks}", 4, "/bin/g", {"train", "--dp", "4"}),
            (std::vector<std::string>{"mpirun", "-np", "4", "/bin/g", "train", "--dp", "4"}));
  EXPECT_EQ(child_command("srun --ntasks={ranks} --mpi=pmix", 8, "/bin/g", {"train"}),
            (std::vector<std::string>{"srun", "--ntasks=8", "--mpi=pmix", "/bin/g", "train"}));
  // One rank: no launcher at all.
  EXPECT_EQ(child_command("mpirun -np {ranks}", 1, "/bin/g", {"plan"}), (std::vector<std::string>{"/bin/g", "plan"}));
}

// Run by the sweep_oom_mpi ctest only (it sets GPULEDGER_MPIEXEC). tiny-llama
// on two pipeline stages: after set-up each rank holds ~864 KB (weights,
// gradients, fp32 master, AdamW state); in the step stage 0 peaks at 1,178,112
// bytes and stage 1 at 1,059,968 (the meta backend's ledger of the same run,
// which books no GEMM workspace). A limit of 1,100,000 bytes is exceeded by
// rank 0 in the middle of step 0; the cpu backend's GEMM workspace (its size
// depends on the CPU's GEMM route, kernels/cpu/ops_gemm.cpp) can take rank 1
// past it too, and whichever rank fails first writes the report and aborts
// its job. The sweep must go on to the next point.
TEST(SweepOomMpi, AnOutOfMemoryMidStepOnOneRankEndsThatPointOnly) {
  const char* mpiexec = std::getenv("GPULEDGER_MPIEXEC");
  if (!mpiexec) GTEST_SKIP() << "run by the sweep_oom_mpi ctest";
  const std::string out = scratch_dir("sweep-oom-mpi");
  const std::string cmd = std::string(mpiexec) + " -n 2 --oversubscribe " + GPULEDGER_BIN +
                          " sweep train --model tiny-llama --backend cpu --steps 2 --warmup 0 --seq 32 --mbs 2"
                          " --microbatches 2 --pp 2 --grid memory-limit=1100000,1Gi --out " +
                          out + " > " + out + "/stdout.txt 2>&1";
  const int rc = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(rc)) << cmd;
  EXPECT_EQ(WEXITSTATUS(rc), 1) << cmd;  // a failed point
  const json index = read_json(out + "/sweep.json");
  ASSERT_EQ(index["points"].size(), 2u);
  EXPECT_EQ(index["summary"]["complete"], true);
  const json& oom = index["points"][0];
  EXPECT_EQ(oom["status"], "oom") << oom.dump();
  const std::string error = oom["error"].get<std::string>();
  const int failed_rank = contains(error, "rank 0:") ? 0 : contains(error, "rank 1:") ? 1 : -1;
  EXPECT_NE(failed_rank, -1) << oom.dump();
  EXPECT_TRUE(contains(oom["error"].get<std::string>(), "would exceed the memory limit 1100000")) << oom.dump();
  // The report is the failing rank's, whole, with its ledger at the failure (in step 0).
  const json doc = read_json(out + "/memory-limit1100000.json");
  EXPECT_EQ(doc["status"], "oom");
  ASSERT_EQ(doc["ranks"].size(), 1u);
  EXPECT_EQ(doc["ranks"][0]["rank"], failed_rank);
  const int64_t peak = doc["ranks"][0]["measured"]["peak_bytes"];
  EXPECT_GT(peak, 864000);   // more than set-up holds: the step had begun
  EXPECT_LE(peak, 1100000);  // and the ledger never passed the limit
  EXPECT_FALSE(fs::exists(out + "/memory-limit1100000.json.failed-rank"));
  // The next point ran, as a job of its own, and passed.
  EXPECT_EQ(index["points"][1]["status"], "ok") << index["points"][1].dump();
  const json ok = read_json(out + "/memory-limit1Gi.json");
  EXPECT_EQ(ok["summary"]["loss"].size(), 2u);
  EXPECT_EQ(ok["ranks"].size(), 2u);
  // The CPU peak was measured once, by the sweep, and is what the point's MFU is taken against.
  std::ifstream log(out + "/stdout.txt");
  std::stringstream text;
  text << log.rdbuf();
  const std::string all = text.str();
  const auto first = all.find("measuring the CPU peak once");
  ASSERT_NE(first, std::string::npos) << all;
  EXPECT_EQ(all.find("measuring the CPU peak once", first + 1), std::string::npos) << all;
  EXPECT_EQ(ok["summary"]["peak_flops"], read_json(out + "/sweep.peak.json")["cpu_peak_flops"]);
  EXPECT_TRUE(contains(ok["summary"]["peak_source"].get<std::string>(), "measured once for the sweep"));
}

}  // namespace
