// `gpuledger peak`: measured GEMM FLOP/s (square and llama2-7b layer shapes)
// and memory bandwidth of a backend — the peak MFU is taken against when the
// device has no datasheet figure (the CPU). The bandwidth: on the cpu the
// read-dominated STREAM (bench/stream_read.h: a dot over two arrays sized
// from the last-level cache), on cuda STREAM's add through the Device. On the
// cpu the hardware peak (bench/host_cpu.h) is printed beside the measured one.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <memory>
#include <optional>
#include <ostream>

#include "bench/cli/commands.h"
#include "bench/host_cpu.h"
#include "bench/peak.h"
#include "bench/report/format.h"
#include "bench/report/hardware_fma_json.h"
#include "bench/report/report.h"
#include "bench/report/table.h"
#include "bench/stream_read.h"
#include "kernels/cpu/gemm_bf16_dot.h"
#include "kernels/device.h"
#include "kernels/registry/registry.h"

namespace gpuledger::cli {

using nlohmann::json;

namespace {

struct PeakOptions {
  std::string backend = "cpu";
  std::vector<std::string> dtypes = {"fp32", "bf16"};
  int warmup = 1, reps = 5;
  double bandwidth_mib = 0;  // 0: the cpu's sizing rule, 256 MiB on cuda
  bool quick = false;
  OutputOptions out;
};

// The bandwidth with its method: on the cpu the read STREAM (arrays sized from
// the LLC unless --bandwidth-mib is given), elsewhere STREAM add through the Device.
json measure_bandwidth_json(Device& dev, const PeakOptions& o) {
  const auto given = static_cast<int64_t>(o.bandwidth_mib * 1048576.0);
  if (o.backend == "cpu") {
    const auto r = bench::measure_read_bandwidth(o.warmup, o.reps, given);
    return {{"kernel", r.kernel()},
            {"method", "read"},
            {"arrays", 2},
            {"bytes_per_array", r.sizing.array_bytes},
            {"threads", r.threads},
            {"isa", r.isa},
            {"llc_bytes", r.sizing.llc_bytes},
            {"mem_available_bytes", r.sizing.mem_available_bytes},
            {"cap_bytes_per_array", r.sizing.cap_bytes},
            {"median_seconds", r.median_seconds},
            {"bytes_per_s", r.bytes_per_s}};
  }
  const auto bw = bench::measure_bandwidth(dev, given > 0 ? given : int64_t{256} << 20, o.warmup, o.reps);
  return {{"kernel", "STREAM add c = a + b (fp32) through the Device, 3 arrays moved"},
          {"method", "add"},
          {"arrays", 3},
          {"bytes_per_array", bw.bytes_per_array},
          {"median_seconds", bw.median_seconds},
          {"bytes_per_s", bw.bytes_per_s}};
}

// One line per measured width, then the cross-check when table and measurement disagree.
void print_hardware_fma(std::ostream& os, const json& fma) {
  for (const auto& m : fma["measured"])
    os << fmt::format("# FMA throughput on one core: {} ({}-bit, {} lanes): {:.2f} {}/cycle = {:.1f} FLOPs/cycle\n",
                      m["isa"].get<std::string>(), m["width_bits"].get<int>(), m["fp32_lanes"].get<int>(),
                      m["fma_per_cycle"].get<double>(), m["fused"].get<bool>() ? "FMA" : "mul+add",
                      m["flops_per_cycle"].get<double>());
  if (!fma["cross_check"].is_null()) os << "# WARNING hardware peak: " << fma["cross_check"].get<std::string>() << "\n";
}

int run_peak(const PeakOptions& o) {
  Ledger ledger;
  auto dev = make_device(o.backend, ledger);
  json doc = report::make_report("peak");
  doc["env"]["backend"] = o.backend;
  doc["env"]["device"] = dev->description();
  doc["config"] = {{"warmup", o.warmup}, {"reps", o.reps}, {"dtypes", o.dtypes}, {"quick", o.quick}};
  std::ostream& os = table_stream(o.out);
  if (!o.out.quiet)
    os << fmt::format("# gpuledger peak on {} ({}): median of {} repetitions after {} warm-up\n", o.backend,
                      dev->description(), o.reps, o.warmup);
  std::vector<bench::GemmShape> shapes = bench::default_gemm_shapes();
  if (o.quick) shapes = {{"square 1024", 1024, 1024, 1024}, {"square 2048", 2048, 2048, 2048}};
  std::vector<bench::GemmPeak> peaks;
  report::Table t("GEMM C(m×n) = A(m×k)·Bᵀ, fp32 accumulate");
  t.columns({"shape", "m", "n", "k", "dtype", "median", "FLOP/s"});
  for (const auto& dt : o.dtypes) {
    const DType dtype = *dtype_from_name(dt);
    for (const auto& s : shapes) {
      peaks.push_back(bench::measure_gemm(*dev, s, dtype, o.warmup, o.reps));
      const auto& p = peaks.back();
      t.row({s.name, std::to_string(s.m), std::to_string(s.n), std::to_string(s.k), dt,
             report::format_seconds(p.median_seconds), report::format_si(p.flops_per_s, "FLOP/s")});
      doc["gemm"].push_back({{"shape", s.name},
                             {"m", s.m},
                             {"n", s.n},
                             {"k", s.k},
                             {"dtype", dt},
                             {"median_seconds", p.median_seconds},
                             {"flops_per_s", p.flops_per_s}});
    }
  }
  const json bw = measure_bandwidth_json(*dev, o);
  doc["bandwidth"] = bw;
  json s = json::object();
  for (const auto& dt : o.dtypes) s["peak_flops_" + dt] = bench::best_flops(peaks, *dtype_from_name(dt));
  s["bandwidth_bytes_per_s"] = bw["bytes_per_s"];
  s["peak_source"] = "measured by gpuledger peak on " + o.backend + " (" + dev->description() + ")";
  if (o.backend == "cpu") {
    // fp32 arithmetic bounds every dtype's GEMM but a bf16 one multiplied in bf16 pairs, which has its own figure.
    const bool bf16_pairs = bf16_dot_enabled();
    bench::HardwarePeak hw = bench::host_hardware_peak();
    std::optional<bench::HardwarePeak> hw_bf16;
    if (bf16_pairs && std::find(o.dtypes.begin(), o.dtypes.end(), "bf16") != o.dtypes.end())
      hw_bf16 = bench::host_hardware_peak(DType::kBF16);
    for (const auto& p : peaks) {
      const std::string what =
          "the best GEMM measured here (" + p.shape.name + ", " + std::string(dtype_name(p.dtype)) + ")";
      if (p.dtype == DType::kBF16 && bf16_pairs) {
        if (hw_bf16) bench::raise_to_measured(*hw_bf16, p.flops_per_s, what);
      } else {
        bench::raise_to_measured(hw, p.flops_per_s, what);
      }
    }
    s["hardware_peak_flops"] = hw.flops_per_s > 0 ? json(hw.flops_per_s) : json(nullptr);
    s["hardware_peak_source"] = hw.source;
    if (hw.cpu) s["hardware_peak_fma"] = report::hardware_fma_json(*hw.cpu);
    if (hw_bf16) {
      s["hardware_peak_flops_bf16"] = hw_bf16->flops_per_s > 0 ? json(hw_bf16->flops_per_s) : json(nullptr);
      s["hardware_peak_source_bf16"] = hw_bf16->source;
    }
  }
  doc["summary"] = s;
  if (!o.out.json_path.empty()) report::write_report(doc, o.out.json_path);
  if (!o.out.quiet) {
    os << t.render();
    os << fmt::format("# bandwidth: {}: {} (median {})\n", bw["kernel"].get<std::string>(),
                      report::format_si(bw["bytes_per_s"].get<double>(), "B/s"),
                      report::format_seconds(bw["median_seconds"].get<double>()));
    for (const auto& dt : o.dtypes)
      os << fmt::format("# peak {}: {} (measured)\n", dt,
                        report::format_si(s["peak_flops_" + dt].get<double>(), "FLOP/s"));
    if (s.contains("hardware_peak_fma")) print_hardware_fma(os, s["hardware_peak_fma"]);
    if (s.contains("hardware_peak_source"))
      os << fmt::format("# hardware peak fp32: {}\n", s["hardware_peak_source"].get<std::string>());
    if (s.contains("hardware_peak_source_bf16"))
      os << fmt::format("# hardware peak bf16: {}\n", s["hardware_peak_source_bf16"].get<std::string>());
  }
  return 0;
}

}  // namespace

void add_peak_command(CLI::App& root, std::vector<Command>& out) {
  auto o = std::make_shared<PeakOptions>();  // CLI11 binds to it; the run closure keeps it alive
  auto* app = root.add_subcommand("peak", "measure achievable GEMM FLOP/s and memory bandwidth of a backend");
  app->add_option("--backend", o->backend, "cpu | cuda")->capture_default_str()->check(CLI::IsMember({"cpu", "cuda"}));
  app->add_option("--dtypes", o->dtypes, "GEMM operand dtypes")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
      ->delimiter(',');
  app->add_option("--warmup", o->warmup, "untimed repetitions")->capture_default_str()->check(CLI::Range(0, 100));
  app->add_option("--reps", o->reps, "timed repetitions (median reported)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  finite_in(
      app->add_option("--bandwidth-mib", o->bandwidth_mib,
                      "bytes per STREAM array (MiB); default: cpu max(4 × LLC, 64 MiB) capped at 1 GiB, cuda 256"),
      1.0, 65536.0);
  app->add_flag("--quick", o->quick, "only the 1024 and 2048 squares");
  add_output_options(*app, o->out);
  out.push_back({app, [o]() { return run_peak(*o); }});
}

}  // namespace gpuledger::cli
