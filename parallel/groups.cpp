// Groups: building one rank's communicators for a layout (see groups.h). The
// only file outside comm/ that names MPI, behind GPULEDGER_HAVE_MPI,
// so that it builds in a binary without MPI.
#include "parallel/groups.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "comm/sim_comm.h"

#if GPULEDGER_HAVE_MPI
#include <mpi.h>

#include "comm/mpi_check.h"
#include "comm/mpi_comm.h"
#endif
#if GPULEDGER_HAVE_NCCL
#include "comm/make_nccl_comm.h"
#endif

namespace {
#if GPULEDGER_HAVE_NCCL
constexpr bool kHaveNccl = true;
#else
constexpr bool kHaveNccl = false;
#endif
}  // namespace

namespace gpuledger {
namespace {

int64_t position(const std::vector<int64_t>& members, int64_t rank) {
  auto it = std::find(members.begin(), members.end(), rank);
  if (it == members.end()) throw std::logic_error("rank " + std::to_string(rank) + " is not in its own group");
  return it - members.begin();
}

// The group kinds, in the one order every rank builds them (MPI_Comm_split
// is collective over the world: ranks must agree on the sequence of calls).
struct GroupSpec {
  const char* name;
  std::vector<int64_t> members;
  bool exists;  // false: no rank has this kind of group (emb when untied or pp = 1)
};

std::vector<GroupSpec> group_specs(const Layout& l, int64_t rank, bool tied) {
  return {
      {"tp", l.tp_group(rank), true}, {"dp", l.dp_cp_group(rank), true},
      {"pp", l.pp_group(rank), true}, {"emb", emb_group(l, rank, tied), tied && l.pp > 1},
      {"ep", l.ep_group(rank), true}, {"edp", l.ep > 1 ? l.expert_dp_group(rank) : std::vector<int64_t>{}, l.ep > 1},
      {"cp", l.cp_group(rank), true}};
}

std::unique_ptr<Comm>* slot(Groups& g, const std::string& name) {
  if (name == "tp") return &g.tp;
  if (name == "dp") return &g.dp;
  if (name == "pp") return &g.pp;
  if (name == "ep") return &g.ep;
  if (name == "edp") return &g.expert_dp;
  if (name == "cp") return &g.cp;
  return &g.emb;
}

}  // namespace

RankContext Groups::context() const {
  RankContext c;
  c.layout = layout;
  c.rank = rank;
  c.coords = layout.coords(rank);
  c.tp = tp.get();
  c.dp = dp.get();
  c.pp = pp.get();
  c.emb = emb.get();
  c.ep = ep.get();
  c.expert_dp = expert_dp ? expert_dp.get() : dp.get();
  c.cp = cp.get();
  c.counters = counters;
  return c;
}

std::vector<int64_t> emb_group(const Layout& l, int64_t rank, bool tied_embeddings) {
  if (!tied_embeddings || l.pp == 1) return {};
  Coords c = l.coords(rank);
  if (c.pp != 0 && c.pp != l.pp - 1) return {};
  Coords first = c, last = c;
  first.pp = 0;
  last.pp = l.pp - 1;
  return {l.rank(first), l.rank(last)};
}

Groups make_sim_groups(const Layout& l, int64_t rank, CommCounters& counters, Device& device, bool tied_embeddings,
                       StepProgramSink* program) {
  Groups g;
  g.layout = l;
  g.rank = rank;
  g.counters = &counters;
  for (auto& spec : group_specs(l, rank, tied_embeddings)) {
    if (spec.members.empty()) continue;
    const int64_t n = static_cast<int64_t>(spec.members.size());
    if (n == 1)
      *slot(g, spec.name) = make_self_comm(spec.name, counters, device);
    else if (program)
      *slot(g, spec.name) =
          std::make_unique<SimComm>(spec.name, counters, spec.members, position(spec.members, rank), program);
    else
      *slot(g, spec.name) = make_sim_comm(spec.name, counters, n, position(spec.members, rank));
  }
  return g;
}

CommBackend comm_backend_for(const std::string& device_backend) {
  return device_backend == "cuda" ? CommBackend::kNccl : CommBackend::kMpi;
}

Groups make_single_groups(CommCounters& counters, Device& device) {
  return make_sim_groups(Layout{}, 0, counters, device, false);  // every group has one rank
}

#if GPULEDGER_HAVE_MPI

void require_mpi_world(int64_t world_size, const Layout& l) {
  if (world_size != l.world())
    throw LayoutError("mpirun -np " + std::to_string(world_size) + " but the layout needs dp·tp·pp = " +
                      std::to_string(l.dp) + "·" + std::to_string(l.tp) + "·" + std::to_string(l.pp) +
                      (l.cp > 1 ? "·cp " + std::to_string(l.cp) : std::string()) + " = " + std::to_string(l.world()));
}

Groups make_mpi_groups(const Layout& l, CommCounters& counters, Device& device, bool tied_embeddings,
                       CommBackend backend) {
  int world_rank = 0, world_size = 1;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank), "reading the world rank");
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world_size), "reading the world size");
  require_mpi_world(world_size, l);
  Groups g;
  g.layout = l;
  g.rank = world_rank;
  g.counters = &counters;
  for (auto& spec : group_specs(l, world_rank, tied_embeddings)) {
    if (!spec.exists) continue;  // the same on every rank: nobody splits
    // Every group of a kind has the same size, so either no rank splits or all do.
    const bool single = spec.name == std::string("emb") ? false : spec.members.size() == 1;
    if (single) {
      *slot(g, spec.name) = make_self_comm(spec.name, counters, device);
      continue;
    }
    // Same on every rank (group sizes and existence are), so every rank throws together.
    if (backend == CommBackend::kNccl && !kHaveNccl)
      throw std::invalid_argument(std::string("the cuda backend's '") + spec.name +
                                  "' group needs NCCL, and this gpuledger was built without it "
                                  "(configure with CUDA and NCCL found)");
    // Middle stages pass no members for emb and get no comm, but still take part in the split.
    auto mpi = split_world_comm(spec.name, counters, spec.members);
#if GPULEDGER_HAVE_NCCL
    if (backend == CommBackend::kNccl && mpi) {
      *slot(g, spec.name) = make_nccl_comm(std::move(mpi), counters, device);  // collective over the group
      continue;
    }
#endif
    *slot(g, spec.name) = std::move(mpi);
  }
  return g;
}

#else

Groups make_mpi_groups(const Layout&, CommCounters&, Device&, bool, CommBackend) {
  throw std::logic_error("make_mpi_groups: this gpuledger was built without MPI");
}

#endif

}  // namespace gpuledger
