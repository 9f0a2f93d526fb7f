// `gpuledger calibrate --out PROFILE.json`: measures this machine into a
// device profile (bench/run/calibrate_device.h) and, under an MPI launcher with
// more than one rank, the job's network into a network profile
// (bench/run/calibrate_network.h) — the measured counterparts of the published
// profiles (perf/profiles/, docs/perf-model.md). Progress on stderr; the
// summary on stdout; exit 2 on bad input, before anything is measured.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>
#include <memory>
#include <stdexcept>

#include "bench/cli/commands.h"
#include "bench/cli/config_options.h"
#include "bench/report/report.h"
#include "bench/run/calibrate_device.h"
#include "bench/run/calibrate_gemm_calls.h"
#include "bench/run/calibrate_network.h"
#include "bench/run/launcher.h"
#include "perf/profile_json.h"

namespace gpuledger::cli {
namespace {

struct CalibrateOptions {
  std::string out, network_out, name;
  std::vector<std::string> dtypes = {"fp32", "bf16"};
  bool quick = false;
  std::vector<std::string> for_runs;  // --for: train options whose GEMM calls to measure
  int threads = 0;                    // 0: OpenMP's own choice
  std::string command;                // the command line, for the provenance
};

std::string default_network_out(const std::string& out) {
  const std::string stem = out.size() > 5 && out.ends_with(".json") ? out.substr(0, out.size() - 5) : out;
  return stem + ".network.json";
}

void check_destination(const std::string& path, const char* option) {
  if (report::is_stdout_path(path)) return;
  const std::string problem = report::report_destination_problem(path);
  if (!problem.empty()) throw std::invalid_argument(std::string(option) + " " + path + ": " + problem);
}

// One --for value: a train run's configuration options (model, layout, dtype,
// …), space-separated as on a command line.
ResolvedConfig parse_run(const std::string& flags) {
  CLI::App app{"calibrate --for"};
  ConfigOptions o;
  add_config_options(app, o, kTrainingConfigOptions);
  try {
    app.parse(flags, false);
  } catch (const CLI::ParseError& e) {
    throw std::invalid_argument("--for '" + flags + "': " + e.what() +
                                " (give the options of a train run that set its model, layout and dtype)");
  }
  try {
    return resolve_config(o);
  } catch (const std::exception& e) {
    throw std::invalid_argument("--for '" + flags + "': " + e.what());
  }
}

void print_summary(const perf::DeviceProfile& d, const std::optional<perf::NetworkProfile>& n,
                   const CalibrateOptions& o, const std::string& network_out) {
  std::cout << fmt::format("# gpuledger calibrate: device profile {} -> {}\n", d.name, o.out);
  for (const auto& [dtype, f] : d.dtypes)
    std::cout << fmt::format(
        "# gemm {}: best {:.4g} GFLOP/s of a {}-point grid; peak {:.4g} GFLOP/s; efficiency {:.3f}\n",
        dtype_name(dtype), f.gemm->table.best_per_s() / 1e9, f.gemm->table.points().size(),
        f.peak_flops_per_s.value / 1e9, f.gemm_efficiency.value);
  for (const auto& [dtype, f] : d.dtypes)
    if (!f.gemm_points.seconds.empty())
      std::cout << fmt::format("# gemm {}: {} calls of the --for runs measured\n", dtype_name(dtype),
                               f.gemm_points.seconds.size());
  std::cout << fmt::format("# memory bandwidth {:.4g} GB/s; host copy {:.4g} GB/s; launch floor {:.3g} us\n",
                           d.memory_bandwidth_bytes_per_s.value / 1e9, d.host_copy_bytes_per_s.value / 1e9,
                           d.launch_floor_seconds.value * 1e6);
  std::string classes;
  for (const auto& [cls, bw] : d.op_class_bandwidth)
    classes += fmt::format("{}{} {:.4g}", classes.empty() ? "" : "; ", perf::op_class_name(cls), bw.value / 1e9);
  std::cout << fmt::format("# op classes (GB/s): {}\n", classes);
  for (const auto& [kind, f] : d.attention)
    std::cout << fmt::format("# attention {}: best {:.4g} GFLOP/s of a {}-point grid; efficiency {:.3f}\n",
                             perf::attention_kind_name(kind), f.table.best_per_s() / 1e9, f.table.points().size(),
                             f.efficiency.value);
  std::cout << fmt::format("# threads: {}\n", d.fingerprint.value("calibrate_threads", 0));
  if (!n) return;
  const auto& link = n->intra_node ? *n->intra_node : *n->inter_node;
  std::cout << fmt::format(
      "# network profile -> {}: {} ranks per node; {}: alpha {:.3g} us, beta (busbw) {:.4g} GB/s\n", network_out,
      n->ranks_per_node_count(), link.kind, link.latency_seconds.value * 1e6, link.busbw_bytes_per_s.value / 1e9);
}

int run_calibrate(const CalibrateOptions& o) {
  check_destination(o.out, "--out");
  if (o.threads > 0) bench::use_cpu_threads(o.threads);  // before any CPU device reads the count
  const bool under_mpi = run::launched_by_mpi_launcher();
  const std::string network_out = o.network_out.empty() ? default_network_out(o.out) : o.network_out;
  if (under_mpi) check_destination(network_out, "--network-out");

  bench::DeviceCalibration dc = o.quick ? bench::quick_device_calibration() : bench::DeviceCalibration{};
  dc.dtypes.clear();
  for (const auto& d : o.dtypes) dc.dtypes.push_back(*dtype_from_name(d));
  dc.name = o.name.empty() ? report::host_name() : o.name;
  dc.command = o.command;
  bench::NetworkCalibration nc = o.quick ? bench::quick_network_calibration() : bench::NetworkCalibration{};
  nc.name = dc.name;
  if (dc.dtypes.empty()) throw std::invalid_argument("--dtypes: give at least one dtype (fp32, bf16, fp16)");
  nc.dtype = dc.dtypes.front();  // the runs' dtype, as the op classes'
  nc.command = o.command;

  std::vector<ResolvedConfig> runs;
  for (const auto& f : o.for_runs) runs.push_back(parse_run(f));  // bad input before anything is measured

  perf::DeviceProfile device;
  // Every rank measures (calibrate_under_mpi says why); rank 0 reports progress.
  auto measure_device = [&](bool report) {
    std::ostream quiet(nullptr);
    std::ostream& progress = report ? std::cerr : quiet;
    device = bench::calibrate_device(dc, progress);
    bench::calibrate_gemm_calls(device, runs, dc.warmup + 1, std::max(dc.reps, 5), progress);
  };
  std::optional<perf::NetworkProfile> network;
  if (under_mpi) {
    const bench::MpiCalibration m = bench::calibrate_under_mpi(nc, measure_device, std::cerr);
    if (!m.is_rank0) return 0;  // rank 0 writes
    network = m.network;
    if (m.world_size == 1) std::cerr << "calibrate: one rank: no network to measure (run under mpirun -n 2 or more)\n";
  } else {
    measure_device(true);
  }
  report::write_report(perf::device_profile_to_json(device), o.out);
  if (network) report::write_report(perf::network_profile_to_json(*network), network_out);
  print_summary(device, network, o, network_out);
  return 0;
}

}  // namespace

void add_calibrate_command(CLI::App& root, std::vector<Command>& out, const std::string& command_line) {
  auto o = std::make_shared<CalibrateOptions>();
  o->command = command_line;
  auto* app = root.add_subcommand(
      "calibrate",
      "measure this machine into a device profile (GEMM over an (m, n, k) grid, the bandwidth-bound op classes, "
      "attention, memory and copy bandwidth, launch floor) and, under mpirun with more than one rank, a network "
      "profile (α and β fitted to all-reduce, "
      "all-gather, reduce-scatter and send/recv); schemas in docs/perf-model.md");
  app->add_option("--out", o->out, "where to write the device profile (gpuledger.device_profile/1 JSON)")->required();
  app->add_option("--network-out", o->network_out,
                  "where to write the network profile under mpirun (default: --out with .network.json)");
  app->add_option("--name", o->name, "the profiles' name (default: this host's name)");
  app->add_option("--dtypes", o->dtypes,
                  "GEMM operand dtypes to measure; the first is also the dtype of the op classes and attention (the "
                  "dtype of the runs to predict, and of the collectives under mpirun)")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
      ->delimiter(',');
  app->add_option("--for", o->for_runs,
                  "also measure every GEMM call of this train run (its options, space-separated and quoted: "
                  "\"--model small-llama --seq 256 --tp 2 --dtype bf16\"), so that a prediction of it prices each "
                  "GEMM by its own time; repeatable");
  app->add_flag("--quick", o->quick,
                "a few seconds: a 2×2×2 GEMM grid (256 and 1024), 2 sizes of op classes, 2 attention points, 3 sizes "
                "of collectives, fewer repetitions");
  app->add_option("--threads", o->threads,
                  "OpenMP threads of the CPU backend while measuring (default: OpenMP's own, the cores this process "
                  "may run on); calibrate with the threads each rank of the runs to predict will have")
      ->check(CLI::Range(1, 4096));
  out.push_back({app, [o]() { return run_calibrate(*o); }});
}

}  // namespace gpuledger::cli
