// Test helper (not a test binary): one rank of a multi-rank layout — a Device
// and Ledger of its own, its Groups (real MPI ranks through make_mpi_groups,
// or a simulated rank through make_sim_groups on any backend) and a Trainer —
// and the one-rank reference run the equivalence tests compare against.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/model_config.h"
#include "core/run_config.h"
#include "kernels/device.h"
#include "kernels/ledger.h"
#include "kernels/registry/registry.h"
#include "parallel/groups.h"
#include "parallel/train_step.h"

namespace gpuledger::testing {

struct RankRig {
  Ledger ledger;
  std::unique_ptr<Device> dev;
  CommCounters counters;
  Groups groups;
  std::unique_ptr<Trainer> trainer;

  // Simulated rank `rank` of `layout` (SimComm groups).
  RankRig(const std::string& backend, const ModelConfig& m, const RunConfig& r, const Layout& layout, int64_t rank,
          std::optional<int64_t> limit_bytes = std::nullopt)
      : ledger(limit_bytes), dev(make_device(backend, ledger)) {
    groups = make_sim_groups(layout, rank, counters, *dev, m.tied_embeddings);
    make_trainer(m, r, layout, rank);
  }

#if GPULEDGER_HAVE_MPI
  struct Mpi {};
  // This process's rank of an MPI job (collective: every rank constructs one).
  RankRig(Mpi, const std::string& backend, const ModelConfig& m, const RunConfig& r, const Layout& layout,
          std::optional<int64_t> limit_bytes = std::nullopt)
      : ledger(limit_bytes), dev(make_device(backend, ledger)) {
    groups = make_mpi_groups(layout, counters, *dev, m.tied_embeddings);
  }
  // Second half of the MPI constructor, separate so that a failure in it can
  // be agreed on (comm/mpi_runtime.h agree_status) before any step.
  void build(const ModelConfig& m, const RunConfig& r, const Layout& layout) {
    make_trainer(m, r, layout, groups.rank);
  }
#endif

  void make_trainer(const ModelConfig& m, const RunConfig& r, const Layout& layout, int64_t rank) {
    RankContext ctx = groups.context();
    ctx.layout = layout;
    ctx.rank = rank;
    ctx.coords = layout.coords(rank);
    trainer = std::make_unique<Trainer>(*dev, m, r, ctx);
  }
};

// The run of one rank per model replica with the whole global batch: m·dp
// microbatches of the same size, so every layout sees the same sequences.
// Offload needs ZeRO >= 1; the reference (one rank, no ZeRO) runs without it,
// which is what an offloaded layout is compared with.
inline RunConfig reference_run(RunConfig r, const Layout& l) {
  r.microbatches *= l.dp;
  r.offload_optimizer = false;
  return r;
}

struct Trajectory {
  std::vector<double> losses;
  std::vector<double> grad_norms;
  std::map<std::string, std::vector<float>> params;  // tensor name -> fp32 values
};

inline std::map<std::string, std::vector<float>> params_by_name(const Trainer& t) {
  std::map<std::string, std::vector<float>> out;
  const std::vector<float> all = t.parameters_fp32();
  size_t pos = 0;
  for (const auto& [name, n] : t.parameter_tensors()) {
    out[name].assign(all.begin() + static_cast<std::ptrdiff_t>(pos),
                     all.begin() + static_cast<std::ptrdiff_t>(pos + static_cast<size_t>(n)));
    pos += static_cast<size_t>(n);
  }
  return out;
}

// `steps` steps of `trainer`.
inline Trajectory run_steps(Trainer& trainer, int64_t steps) {
  Trajectory tr;
  for (int64_t k = 0; k < steps; ++k) {
    const StepResult res = trainer.step(k);
    tr.losses.push_back(res.loss);
    tr.grad_norms.push_back(res.grad_norm);
  }
  tr.params = params_by_name(trainer);
  return tr;
}

// The one-rank reference on the CPU (no communicator leaves this process).
inline Trajectory reference_trajectory(const ModelConfig& m, const RunConfig& r, int64_t steps) {
  RankRig rig("cpu", m, r, Layout{}, 0);
  return run_steps(*rig.trainer, steps);
}

// The reference tensor a rank's tensor holds: the same name, except the last
// stage's copy of the tied word embedding.
inline std::string reference_name(const std::string& name) {
  return name == "head.word_copy.weight" ? "embedding.word.weight" : name;
}

}  // namespace gpuledger::testing
