// Groups: the communicators of one rank (tp, dp, pp, and emb for tied
// embeddings across pipeline stages), owned here and handed to the model and
// the training step through a RankContext (passed explicitly, no globals:
// Megatron's ProcessGroupCollection idea). Three ways to build them:
//   make_mpi_groups    one real rank of an MPI job (MPI_Comm_split per group kind;
//                      MpiComm, or NcclComm bootstrapped over it for the cuda backend);
//   make_sim_groups    rank r of a simulated world in one process (meta backend):
//                      SimComm books what the real comm would;
//   make_single_groups one rank, no other.
// A group of one rank is always make_self_comm (it moves and books nothing).
// The emb group is the first and last pipeline stage of the same (dp, tp)
// coordinates, in that order, built when embeddings are tied and pp > 1;
// other ranks (middle stages) get none. The ep and expert-dp ("edp") groups
// are Layout::ep_group and expert_dp_group; edp is built only when ep > 1.
// With context parallelism the dp group is Layout::dp_cp_group (Megatron's
// data-parallel group with cp: the dp·cp ranks holding the same parameters,
// over which gradients and the loss are averaged; the dp group when cp = 1)
// and the cp group the ring (Layout::cp_group).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "core/layout.h"
#include "core/step_program.h"
#include "parallel/context/rank_context.h"

namespace gpuledger {

class Device;

struct Groups {
  Layout layout;
  int64_t rank = 0;                  // in the world
  std::unique_ptr<Comm> tp, dp, pp;  // never null
  std::unique_ptr<Comm> emb;         // null unless tied embeddings, pp > 1, first or last stage
  std::unique_ptr<Comm> ep;          // never null: the expert-parallel group (one rank when ep = 1)
  std::unique_ptr<Comm> expert_dp;   // null when ep = 1 (the expert-data-parallel group is then dp)
  std::unique_ptr<Comm> cp;          // never null: the context-parallel ring (one rank when cp = 1)
  CommCounters* counters = nullptr;

  // Pointers into this object: it must outlive the context.
  RankContext context() const;
};

// The emb group of `rank` (world ranks: first stage, last stage), or empty
// when it has none. A pure function, like Layout's groups.
std::vector<int64_t> emb_group(const Layout& layout, int64_t rank, bool tied_embeddings);

// Which comm carries an MPI job's groups of more than one rank: MpiComm on
// host buffers (cpu backend), or NcclComm on device buffers (cuda backend;
// one GPU per rank, bootstrapped over the group's MPI communicator).
enum class CommBackend { kMpi, kNccl };

// kNccl for the "cuda" device backend, kMpi for any other.
CommBackend comm_backend_for(const std::string& device_backend);

// Collective over MPI_COMM_WORLD: every rank calls it with the same layout.
// Throws LayoutError "mpirun -np N but the layout needs dp·tp·pp = M" (on every
// rank) when the world size differs, and std::logic_error when built without MPI.
// With kNccl, `device` must be the cuda backend's; a build without NCCL throws
// std::invalid_argument (on every rank) once a group has more than one rank.
// Throws LayoutError unless the MPI world has exactly dp·tp·pp ranks. Every
// rank sees the same sizes, so every rank throws together: no hang.
void require_mpi_world(int64_t world_size, const Layout& l);
Groups make_mpi_groups(const Layout& layout, CommCounters& counters, Device& device, bool tied_embeddings = false,
                       CommBackend backend = CommBackend::kMpi);

// `program`: where the simulated comms report every call (core/step_program.h;
// nullptr: nowhere), with the group's world ranks.
Groups make_sim_groups(const Layout& layout, int64_t rank, CommCounters& counters, Device& device,
                       bool tied_embeddings = false, StepProgramSink* program = nullptr);

Groups make_single_groups(CommCounters& counters, Device& device);

}  // namespace gpuledger
