// Test helper (not a test binary) for the multi-rank training tests: runs a
// layout on the real MPI ranks of this job (cpu backend) and checks, on every
// rank,
//   - equivalence with one rank (same seed, same global batch: the reference
//     runs dp·m microbatches of the same size): the loss of every step within
//     `loss_rel` relative, and every parameter tensor the rank holds within
//     `weight_abs` + `weight_rel`·|value| of the reference's tensor of the same
//     name (a pipeline stage holds its layers, a ZeRO-1 rank the full
//     gathered weights);
//   - that the rank books what the meta simulation of the same rank books
//     (make_sim_groups + the meta Device): every account but workspace to the
//     byte, and the same comm counters (calls and bytes per "<kind>@<group>")
//     for one step. tests/parallel/test_trainer_sim.cpp checks that the
//     simulated ranks book exactly the analytic budget and comm.
#pragma once
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <map>
#include <string>

#include "../rank_rig.h"
#include "comm/mpi_runtime.h"
#include "models/transformer/param_layout.h"
#include "models/transformer/unit_shard.h"

namespace gpuledger::testing {

struct Tolerance {
  double loss_rel = 1e-5;
  double weight_abs = 1e-5;
  double weight_rel = 0.0;
  // bf16 only: the fraction of a tensor's elements allowed past the bound
  // above, all of them within hard_abs.
  double outlier_fraction = 0.0;
  double hard_abs = 0.0;
};

// bf16: a layout reduces gradients in another order and rounds them to bf16
// at other points than one rank (MpiComm rounds the fp32 sum once; one rank
// accumulates microbatch by microbatch). Loss within 1e-3 relative. Weights:
// at least 99% of each tensor's elements within 2 bf16 ulps (2·2⁻⁸ relative)
// + 1e-4; the rest are gradients near 0 whose sign the rounding decides, and
// Adam turns a sign into a full step of ±lr (|m̂/√v̂| ≤ 1 at these β), so every
// element within 2·lr per step (lr = 1e-3, 3 steps: 6e-3).
inline Tolerance bf16_tolerance() { return Tolerance{1e-3, 1e-4, 2.0 / 256, 0.01, 6e-3}; }

// fp32 under TP (test_mixed_train.cpp says why): 0.1% of a tensor's elements
// may exceed 1e-5, none 1e-4.
inline Tolerance tp_tolerance() { return Tolerance{1e-5, 1e-5, 0.0, 0.001, 1e-4}; }

// The groups ZeRO shards rank `rank`'s units over: dp, and the
// expert-data-parallel group (dp/ep ranks; its place there: the dp
// coordinate's position among the ranks holding the same experts).
// ZeRO's groups of a rank: the dp·cp ranks (cp varies fastest), and the expert-data-parallel group.
inline ShardGroups shard_groups_of(const Layout& l, int64_t rank) {
  const Coords c = l.coords(rank);
  return ShardGroups{l.dp_cp(), l.dp_cp_rank(c), l.dp / l.ep, c.dp / l.ep};
}

inline int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

inline RunConfig small_run(int64_t microbatches, Schedule sc, DType dt = DType::kFP32) {
  RunConfig r;
  r.seq = 16;
  r.mbs = 2;
  r.microbatches = microbatches;
  r.schedule = sc;
  r.dtype = dt;
  r.dropout = 0.1;
  r.lr = 1e-3;
  r.bucket_mb = 0.01;  // several buckets, some spanning units
  return r;
}

inline void check_layout(const ModelConfig& m, const RunConfig& r, const Layout& l, int64_t steps,
                         const Tolerance& tol) {
  ASSERT_EQ(l.world(), world_size());
  const Trajectory ref = reference_trajectory(m, reference_run(r, l), steps);

  RankRig rig(RankRig::Mpi{}, "cpu", m, r, l);
  std::string error;
  try {
    rig.build(m, r, l);
  } catch (const std::exception& e) {
    error = e.what();
  }
  const AgreedStatus st = agree_status(error.empty(), error);
  ASSERT_TRUE(st.all_ok) << "rank " << st.first_failed_rank << ": " << st.error;
  const int64_t rank = rig.groups.rank;

  // the meta simulation of this rank
  RankRig sim("meta", m, r, l, rank);

  Trajectory got;
  for (int64_t k = 0; k < steps; ++k) {
    rig.counters.reset();
    const StepResult res = rig.trainer->step(k);
    got.losses.push_back(res.loss);
    got.grad_norms.push_back(res.grad_norm);
    EXPECT_GE(res.comm_seconds, 0.0);
    EXPECT_GE(res.compute_seconds, 0.0);
    if (k == 0) {
      sim.counters.reset();
      sim.trainer->step(0);
      const auto& real_c = rig.counters.by_key();
      const auto& sim_c = sim.counters.by_key();
      EXPECT_EQ(real_c.size(), sim_c.size());
      for (const auto& [key, c] : sim_c) {
        auto it = real_c.find(key);
        if (it == real_c.end()) {
          ADD_FAILURE() << "rank " << rank << " never called " << key;
          continue;
        }
        EXPECT_EQ(it->second.calls, c.calls) << key;
        EXPECT_EQ(it->second.bytes, c.bytes) << key;
      }
      for (Account a : kAllAccounts) {
        if (a != Account::kWorkspace) {
          EXPECT_EQ(rig.ledger.peak_by_account()[a], sim.ledger.peak_by_account()[a])
              << "rank " << rank << " " << account_name(a);
        }
      }
      // model states only between steps
      EXPECT_EQ(rig.ledger.live_by_account()[Account::kActivations], 0);
      EXPECT_EQ(rig.ledger.live_by_account()[Account::kWorkspace], 0);
    }
  }
  const ParamLayout layout = make_param_layout(m, l, l.coords(rank));
  if (l.zero == 3 && l.dp_cp() > 1) {
    // ZeRO 3: the rank holds each unit's shard; compare it with the matching
    // slice of the reference (unit element → tensor, row, column → full index)
    const std::vector<float> flat = rig.trainer->parameters_fp32();
    size_t pos = 0;
    size_t bad = 0;
    double worst = 0;
    for (const UnitLayout& u : layout.units) {
      for (const ShardPart& part : unit_shard(u, shard_groups_of(l, rank)).parts)
        for (int64_t x = part.begin; x < part.begin + part.valid; ++x, ++pos) {
          const TensorSlot* t = nullptr;
          for (const auto& cand : u.tensors)
            if (x >= cand.offset && x < cand.offset + cand.elems()) t = &cand;
          const int64_t local = x - t->offset;
          const auto gi = global_element_index(*t, local / t->cols, local % t->cols);
          const double want_v = gi ? ref.params.at(reference_name(t->name)).at(static_cast<size_t>(*gi)) : 0.0;
          const double d = std::abs(static_cast<double>(flat.at(pos)) - want_v);
          if (d > tol.weight_abs + tol.weight_rel * std::abs(want_v)) ++bad;
          worst = std::max(worst, d);
        }
    }
    EXPECT_EQ(pos, flat.size());
    EXPECT_LE(static_cast<double>(bad), tol.outlier_fraction * static_cast<double>(flat.size()))
        << "rank " << rank << ": " << bad << " shard elements outside the bound, worst " << worst;
  } else {
    got.params = params_by_name(*rig.trainer);
  }

  for (int64_t k = 0; k < steps; ++k)
    EXPECT_NEAR(got.losses[k], ref.losses[k], tol.loss_rel * std::abs(ref.losses[k]))
        << "rank " << rank << " step " << k;
  // the global gradient norm (every element once over the ranks) before clipping
  for (int64_t k = 0; k < steps; ++k)
    EXPECT_NEAR(got.grad_norms[k], ref.grad_norms[k], std::max(tol.loss_rel, 1e-5) * ref.grad_norms[k])
        << "rank " << rank << " gradient norm, step " << k;
  for (const auto& [name, v] : got.params) {
    auto it = ref.params.find(reference_name(name));
    if (it == ref.params.end()) {
      ADD_FAILURE() << "rank " << rank << ": the reference has no tensor " << name;
      continue;
    }
    // a TP slice: local element (r, c) is the reference's element
    // global_element_index(slot, r, c) (models/transformer/param_layout.h)
    const TensorSlot* slot = nullptr;
    for (const auto& u : layout.units)
      for (const auto& t : u.tensors)
        if (t.name == name) slot = &t;
    ASSERT_NE(slot, nullptr) << name;
    ASSERT_EQ(static_cast<int64_t>(v.size()), slot->elems()) << name;
    double worst = 0;
    size_t bad = 0;
    for (int64_t row = 0; row < slot->rows; ++row)
      for (int64_t col = 0; col < slot->cols; ++col) {
        const double got_v = v[static_cast<size_t>(row * slot->cols + col)];
        const auto gi = global_element_index(*slot, row, col);
        const double want_v = gi ? it->second.at(static_cast<size_t>(*gi)) : 0.0;  // padding rows stay 0
        const double d = std::abs(got_v - want_v);
        if (d > tol.weight_abs + tol.weight_rel * std::abs(want_v)) ++bad;
        worst = std::max(worst, d);
      }
    EXPECT_LE(static_cast<double>(bad), tol.outlier_fraction * static_cast<double>(v.size()))
        << "rank " << rank << " " << name << ": " << bad << " of " << v.size()
        << " elements outside the bound, worst difference " << worst;
    if (tol.outlier_fraction > 0) {
      EXPECT_LE(worst, tol.hard_abs) << "rank " << rank << " " << name;
    }
  }
}

// ---- the gradients of one step, element by element ----
// One rank's first-step gradients with the same global batch, by tensor name.
inline std::map<std::string, std::vector<float>> reference_gradients(const ModelConfig& m, const RunConfig& r,
                                                                     const Layout& l) {
  RankRig ref("cpu", m, reference_run(r, l), Layout{}, 0);
  ref.trainer->step(0);
  std::map<std::string, std::vector<float>> want;
  const std::vector<float> all = ref.trainer->gradients_fp32();
  size_t pos = 0;
  for (const auto& [name, n] : ref.trainer->parameter_tensors()) {
    want[name].assign(all.begin() + static_cast<std::ptrdiff_t>(pos),
                      all.begin() + static_cast<std::ptrdiff_t>(pos + static_cast<size_t>(n)));
    pos += static_cast<size_t>(n);
  }
  return want;
}

// The first step's gradients on every rank (fp32 gradients) against one
// rank's with the same global batch: a whole gradient buffer tensor by tensor,
// or under ZeRO 2/3 (dp > 1) each unit's shard (Trainer::gradients_fp32),
// every element within abs + rel·|reference|. Returns the elements compared.
inline int64_t check_step_gradients(const ModelConfig& m, RunConfig r, const Layout& l, double abs, double rel) {
  r.grad_dtype = DType::kFP32;
  const std::map<std::string, std::vector<float>> want = reference_gradients(m, r, l);
  RankRig rig(RankRig::Mpi{}, "cpu", m, r, l);
  rig.build(m, r, l);
  rig.trainer->step(0);
  const int64_t rank = rig.groups.rank;
  const std::vector<float> got = rig.trainer->gradients_fp32();
  const ParamLayout layout = make_param_layout(m, l, l.coords(rank));
  const bool sharded = l.zero >= 2 && l.dp_cp() > 1;
  size_t pos = 0;
  int64_t bad = 0;
  for (const UnitLayout& u : layout.units) {
    const UnitShard sh = sharded ? unit_shard(u, shard_groups_of(l, rank)) : unit_shard(u.elems, 1, 0);
    for (const ShardPart& part : sh.parts)
      for (int64_t x = part.begin; x < part.begin + part.valid; ++x, ++pos) {
        const TensorSlot* t = nullptr;
        for (const auto& cand : u.tensors)
          if (x >= cand.offset && x < cand.offset + cand.elems()) t = &cand;
        const int64_t local = x - t->offset;
        const auto gi = global_element_index(*t, local / t->cols, local % t->cols);
        const double w = gi ? want.at(reference_name(t->name)).at(static_cast<size_t>(*gi)) : 0.0;
        const double g = got.at(pos);
        if (std::abs(g - w) > abs + rel * std::abs(w) && bad++ < 5)
          ADD_FAILURE() << "rank " << rank << " " << t->name << " element " << local << ": " << g << " vs " << w;
      }
  }
  EXPECT_EQ(pos, got.size()) << "rank " << rank;
  EXPECT_EQ(bad, 0) << "rank " << rank;
  return static_cast<int64_t>(pos);
}

// ---- tensor parallelism mixed with dp/pp/ZeRO (test_mixed_train, test_mixed_sp_train) ----
inline Layout mixed(int64_t tp, int64_t dp, int64_t pp, int zero, bool sp) {
  Layout l;
  l.tp = tp;
  l.dp = dp;
  l.pp = pp;
  l.zero = zero;
  l.sp = sp;
  return l;
}

struct MixedCase {
  const char* model;
  Layout layout;
  const char* name;
};

// One mixed layout against one rank, fp32, dropout 0 (np 4 only).
inline void check_mixed_case(const MixedCase& c) {
  if (world_size() != 4) GTEST_SKIP() << "needs 4 ranks";
  RunConfig r = small_run(2, Schedule::k1F1B);
  r.dropout = 0.0;
  check_layout(load_model(c.model), r, c.layout, 2, tp_tolerance());
}

}  // namespace gpuledger::testing
