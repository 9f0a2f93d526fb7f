// How a sweep runs a point: as a child process of its own — a fresh MPI job
// under a launcher when the point has more than one rank — so that a point
// that runs out of memory, aborts or crashes ends only itself (docs/cluster.md
// "Failure isolation"). The child is `gpuledger <subcommand> <point's options>
// --json DIR/<point>.json`, its output in DIR/<point>.log.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gpuledger::cli {

// Under a launcher (mpirun, srun): this process's rank and the job's size, from
// the launcher's variables (OMPI_COMM_WORLD_*, PMI_*, SLURM_*); 0 and 0 without one.
int64_t launcher_rank();
int64_t launcher_world_size();

// Whether an environment variable describes this process's place in the job
// that launched it (OMPI_COMM_WORLD_RANK, PMIX_RANK, Open MPI's own
// OMPI_MCA_orte_* settings, SLURM_PROCID, …): a child launch drops these so that
// it is a job of its own. User settings (OMPI_MCA_btl, OMPI_ALLOW_RUN_AS_ROOT,
// PMIX_MCA_*, the SLURM_JOB_* that srun needs) stay.
bool is_launcher_variable(const std::string& name);

// The launcher command for a job of `ranks`: `--launcher` when given, else srun
// inside a Slurm allocation, else mpirun; "{ranks}" is replaced by the count.
std::string default_launcher();
// The child's command line: the launcher's words (split at spaces, {ranks}
// replaced) when ranks > 1, then `exe` and `args`.
std::vector<std::string> child_command(const std::string& launcher, int64_t ranks, const std::string& exe,
                                       const std::vector<std::string>& args);

// This binary's path (/proc/self/exe).
std::string self_exe();

struct ChildExit {
  int exit = 0;              // the exit status, or 128 + the signal that ended it
  bool interrupted = false;  // the sweep itself got SIGINT/SIGTERM (passed on to the child)
  std::string last_line;     // why it failed: the last line gpuledger wrote, else the log's last line
};

// Runs `argv` with the launcher's variables dropped, its CPU affinity widened
// to the whole machine (a rank of `mpirun -np N gpuledger sweep` may be bound
// to one core, and the point's ranks need them all), stdout and stderr into
// `log_path`; waits for it.
ChildExit run_child(const std::vector<std::string>& argv, const std::string& log_path);

// SIGINT/SIGTERM to the sweep are passed on to the running child, and the sweep
// stops after it (install once, before the first point).
void forward_interrupts_to_children();

}  // namespace gpuledger::cli
