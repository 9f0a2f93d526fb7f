// Recording one rank per pipeline stage and simulating their step (see predict_step.h).
#include "bench/run/predict_step.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <stdexcept>

#include "analytic/flops.h"
#include "analytic/pipeline.h"
#include "bench/run/plan_run.h"
#include "kernels/registry/registry.h"
#include "parallel/groups.h"
#include "parallel/train_step.h"
#include "perf/profile_json.h"
#include "perf/published_profiles.h"
#include "perf/sim/grad_buffer.h"
#include "perf/sim/program_recorder.h"
#include "perf/sim/timeline.h"
#include "perf/sim/tp_overlap.h"

namespace gpuledger::run {
namespace {

bool is_published(const std::string& name) {
  const auto names = perf::published_profile_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

// A name that is neither published nor a file path (no '/', no .json) is a typo, named as such.
void check_name_or_file(const std::string& arg, const char* what) {
  const bool path =
      arg.find('/') != std::string::npos || (arg.size() > 5 && arg.compare(arg.size() - 5, 5, ".json") == 0);
  if (is_published(arg) || path) return;
  std::string names;
  for (const auto& n : perf::published_profile_names()) names += (names.empty() ? "" : ", ") + n;
  throw std::invalid_argument(std::string(what) + " '" + arg + "' is neither a published profile (" + names +
                              ") nor a profile file (a path ending in .json)");
}

perf::DeviceProfile device_profile_named(const std::string& arg) {
  check_name_or_file(arg, "device profile");
  return is_published(arg) ? perf::published_device_profile(arg) : perf::load_device_profile(arg);
}

perf::NetworkProfile network_profile_named(const std::string& arg) {
  check_name_or_file(arg, "network profile");
  return is_published(arg) ? perf::published_network_profile(arg) : perf::load_network_profile(arg);
}

// A layout of one rank communicates over no link.
perf::NetworkProfile no_network() {
  perf::NetworkProfile n;
  n.name = "none";
  n.provenance.kind = perf::kMeasured;
  n.ranks_per_node = {1, "one rank: no network"};
  return n;
}

// One step of `rank` on the meta backend with every call priced into its program.
perf::SimRank record_rank(const ResolvedConfig& c, const PerfProfiles& p, const std::set<int64_t>& simulated,
                          int64_t rank, int64_t& flops, int64_t& ops) {
  perf::ProgramRecorder recorder(p.device, p.network, simulated, rank, role_name(c.layout, rank));
  run_meta_step(c, rank, recorder, [&](bool on) { recorder.set_recording(on); });
  flops = recorder.recorded_flops();
  ops = recorder.recorded_ops();
  return recorder.take_program();
}

}  // namespace

std::vector<int64_t> pipeline_stage_ranks(const Layout& l) {
  std::vector<int64_t> r;
  for (int64_t s = 0; s < l.pp; ++s) r.push_back(l.rank(Coords{0, 0, s, 0}));
  return r;
}

void run_meta_step(const ResolvedConfig& c, int64_t rank, StepProgramSink& sink,
                   const std::function<void(bool)>& recording) {
  const Layout& l = c.layout;
  Ledger ledger;  // no limit: a layout that does not fit is still timed
  auto device = make_device("meta", ledger);
  CommCounters counters;
  device->set_program_sink(&sink);
  Groups groups = make_sim_groups(l, rank, counters, *device, c.model.tied_embeddings, &sink);
  RankContext ctx = groups.context();
  ctx.layout = l;
  ctx.coords = l.coords(rank);
  {
    Trainer trainer(*device, c.model, c.run, ctx);
    recording(true);
    trainer.step(0);
    recording(false);
  }
  device->set_program_sink(nullptr);
}

std::optional<PerfProfiles> resolve_perf_profiles(const std::string& device_arg, const std::string& network_arg,
                                                  const std::optional<DeviceSpec>& device, int64_t world) {
  std::string dev = device_arg;
  if (dev.empty() && device && is_published(device->name)) dev = device->name;
  if (dev.empty()) {
    if (!network_arg.empty())
      throw std::invalid_argument("--network-profile needs a device profile (--device-profile)");
    return std::nullopt;
  }
  PerfProfiles p{device_profile_named(dev), no_network()};
  if (!network_arg.empty())
    p.network = network_profile_named(network_arg);
  else if (is_published(dev))
    p.network = perf::published_network_profile(dev);
  else if (world > 1)
    throw std::invalid_argument("a layout of " + std::to_string(world) +
                                " ranks needs a network profile: pass --network-profile (a published name or a "
                                "file `gpuledger calibrate` wrote)");
  return p;
}

StepPrediction predict_step(const ResolvedConfig& c, const PerfProfiles& p, bool keep_slices) {
  const auto start = std::chrono::steady_clock::now();
  const Layout& l = c.layout;
  const std::vector<int64_t> ranks = pipeline_stage_ranks(l);
  const std::set<int64_t> simulated(ranks.begin(), ranks.end());
  std::vector<perf::SimRank> programs;
  std::vector<int64_t> flops(ranks.size(), 0), ops(ranks.size(), 0);
  for (size_t i = 0; i < ranks.size(); ++i) {
    programs.push_back(record_rank(c, p, simulated, ranks[i], flops[i], ops[i]));
    if (c.run.tp_comm_overlap) perf::overlap_tp_comm(programs.back().program, l.tp);
    if (c.run.contiguous_grad_buffer) perf::defer_grad_reduce_waits(programs.back().program);
  }
  const perf::SimResult sim = perf::simulate_step(programs);

  StepPrediction out;
  out.device_profile = p.device.name;
  out.device_provenance = p.device.provenance.kind;
  out.network_profile = p.network.name;
  out.network_provenance = p.network.provenance.kind;
  out.tp_comm_overlap = c.run.tp_comm_overlap;
  out.contiguous_grad_buffer = c.run.contiguous_grad_buffer;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const perf::SimRankTimes& t = sim.ranks[i];
    PredictedRank r;
    r.rank = ranks[i];
    r.role = programs[i].role;
    r.step_seconds = t.step_seconds;
    r.compute_seconds = t.compute_seconds;
    r.exposed_comm_seconds = t.exposed_comm_seconds;
    r.wait_seconds = t.wait_seconds;
    r.tail_seconds = t.tail_seconds;
    for (const auto& e : programs[i].program)
      if (e.kind != perf::SimEventKind::kCompute) r.collectives += 1;
    r.ops = ops[i];
    r.flops = flops[i];
    if (keep_slices) r.slices = t.slices;
    if (r.step_seconds > out.step_seconds) {
      out.step_seconds = r.step_seconds;
      out.critical_rank = r.rank;
    }
    out.ranks.push_back(std::move(r));
  }
  const auto job = analytic::job_step_flops(c.model, l, c.run);
  out.tokens_per_step = c.run.tokens_per_step(l.dp);
  out.devices = l.world();
  out.model_flops_per_step = job.model;
  out.hardware_flops_per_step = job.hardware;
  const auto dt = p.device.dtypes.find(c.run.dtype);
  if (dt == p.device.dtypes.end())
    throw std::invalid_argument("device profile " + p.device.name + " has no " + std::string(dtype_name(c.run.dtype)) +
                                " figures");
  // FP8 training's MFU is against the FP8 peak, as a measured run's is (core/device_spec.h device_peak_flops).
  out.peak_flops_per_device = c.run.fp8_training() && p.device.fp8_gemm ? p.device.fp8_gemm->peak_flops_per_s.value
                                                                        : dt->second.peak_flops_per_s.value;
  if (out.step_seconds > 0) {
    out.tokens_per_s = static_cast<double>(out.tokens_per_step) / out.step_seconds;
    const double capacity = out.step_seconds * out.peak_flops_per_device * static_cast<double>(out.devices);
    out.mfu = job.model / capacity;
    out.hfu = job.hardware / capacity;
  }
  out.bubble_formula_fraction = analytic::bubble_fraction(l.pp, c.run.microbatches, l.vpp);
  out.simulate_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace gpuledger::run
