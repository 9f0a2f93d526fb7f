// gpl_micro_comm: collective sweeps under mpirun, nccl-tests style, on Google
// Benchmark (docs/micro.md). Every rank runs every benchmark with the same
// fixed iteration counts (adaptive counts could differ between ranks and hang
// a collective); rank 0 alone reports. Exits 1 when any data check found a
// wrong element, 2 on bad flags.
#include <benchmark/benchmark.h>
#include <mpi.h>

#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "bench/micro/comm/comm_options.h"
#include "bench/micro/comm/comm_sweep.h"
#include "comm/mpi_runtime.h"

namespace {

using namespace gpuledger;
using namespace gpuledger::micro;

// Ranks other than 0 run the same benchmarks silently.
class SilentReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

// Non-zero ranks drop the output-file flags, so that only rank 0 writes one.
void drop_output_flags(int* argc, char** argv) {
  int kept = 1;
  for (int i = 1; i < *argc; ++i)
    if (std::strncmp(argv[i], "--benchmark_out", 15) != 0) argv[kept++] = argv[i];
  *argc = kept;
  argv[kept] = nullptr;
}

void register_sweeps(const CommOptions& o, std::vector<std::unique_ptr<CommRig>>& rigs, int64_t rank) {
  const std::vector<int64_t> sizes = sweep_sizes(o);
  for (const auto& backend : o.backends) {
    std::string why;
    auto rig = make_comm_rig(backend, &why);
    if (!rig) {
      benchmark::AddCustomContext("comm " + backend, "not measured: " + why);
      if (rank == 0) std::cerr << "gpl_micro_comm: " << backend << " skipped: " << why << "\n";
      continue;
    }
    benchmark::AddCustomContext("comm " + backend,
                                std::to_string(rig->comm->size()) + " ranks, buffers on " + rig->dev->description());
    CommRig* r = rig.get();
    rigs.push_back(std::move(rig));
    for (const auto& kind_name : o.kinds) {
      Collective kind;
      if (!collective_from_name(kind_name, &kind))
        throw std::invalid_argument("unknown collective '" + kind_name + "'");
      for (DType t : o.dtypes)
        for (bool in_place : {true, false}) {
          if ((in_place && !o.in_place) || (!in_place && !o.out_of_place) || !has_placement(kind, in_place)) continue;
          const SweepPoint p{kind, t, in_place, o.warmup_iters};
          const std::string name = std::string(kind_name) + "/" + backend + "/" + std::string(dtype_name(t)) +
                                   (in_place ? "/in_place" : "/out_of_place");
          auto* bm =
              benchmark::RegisterBenchmark(name.c_str(), [r, p](benchmark::State& st) { run_collective(st, *r, p); });
          bm->UseManualTime()->Iterations(o.iters)->Unit(benchmark::kMicrosecond)->ArgName("bytes");
          for (int64_t b : sizes) bm->Arg(b);
        }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  MpiRuntime mpi(&argc, &argv);
  const int64_t rank = mpi.world_rank();
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--help") == 0 && rank == 0) std::cout << comm_options_help() << "\n";
  CommOptions o;
  try {
    o = parse_comm_options(&argc, argv);
  } catch (const std::exception& e) {
    if (rank == 0) std::cerr << "gpl_micro_comm: " << e.what() << "\n" << comm_options_help();
    return 2;
  }
  if (rank != 0) drop_output_flags(&argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  std::vector<std::unique_ptr<CommRig>> rigs;
  try {
    register_sweeps(o, rigs, rank);
    benchmark::AddCustomContext("ranks", std::to_string(mpi.world_size()));
    benchmark::AddCustomContext("time", "per iteration, the max over ranks (steady_clock around the call)");
    if (rank == 0) {
      benchmark::RunSpecifiedBenchmarks();
    } else {
      SilentReporter silent;
      benchmark::RunSpecifiedBenchmarks(&silent);
    }
  } catch (const std::exception& e) {
    // A rank that stops here would leave its peers inside a collective: abort the job.
    std::cerr << "gpl_micro_comm: rank " << rank << " on " << mpi.hostname() << ": " << e.what() << "\n";
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  benchmark::Shutdown();
  const int64_t wrong = total_wrong();
  rigs.clear();
  if (wrong > 0) {
    if (rank == 0) std::cerr << "gpl_micro_comm: " << wrong << " wrong elements in the data checks\n";
    return 1;
  }
  return 0;
}
