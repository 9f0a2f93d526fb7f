// Points as child jobs (see sweep_launch.h).
#include "bench/cli/sweep_launch.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace gpuledger::cli {

namespace {

int64_t env_int(std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (const char* v = std::getenv(n); v && *v) return std::atoll(v);
  return 0;
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

volatile std::sig_atomic_t g_interrupt = 0;

void on_interrupt(int sig) { g_interrupt = sig; }

// Why the child failed: the last line gpuledger itself wrote ("gpuledger train:
// error: ..."), else the last non-empty line that is not a launcher's banner
// rule (mpirun closes its messages with a line of dashes).
std::string why_from_log(const std::string& path) {
  std::ifstream in(path);
  std::string line, last, ours;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r-") == std::string::npos) continue;
    last = line;
    if (line.rfind("gpuledger", 0) == 0) ours = line;
  }
  return ours.empty() ? last : ours;
}

// In the child, between fork and exec: every CPU of the machine the kernel lets
// it have (sched_setaffinity keeps the cgroup's cpuset, e.g. Slurm's, and fails
// only if nothing is left; then the inherited mask stays).
void widen_affinity() {
  cpu_set_t all;
  CPU_ZERO(&all);
  const long n = sysconf(_SC_NPROCESSORS_CONF);
  for (long c = 0; c < n && c < CPU_SETSIZE; ++c) CPU_SET(c, &all);
  sched_setaffinity(0, sizeof(all), &all);
}

}  // namespace

int64_t launcher_rank() { return env_int({"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}); }

int64_t launcher_world_size() { return env_int({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}); }

bool is_launcher_variable(const std::string& name) {
  if (starts_with(name, "OMPI_")) {
    if (starts_with(name, "OMPI_ALLOW_RUN_AS_ROOT")) return false;
    if (!starts_with(name, "OMPI_MCA_")) return true;  // OMPI_COMM_WORLD_*, OMPI_FILE_LOCATION, ...
    // The MCA settings mpirun gives its ranks (the rest are the user's own).
    for (const char* p : {"OMPI_MCA_orte_", "OMPI_MCA_ess", "OMPI_MCA_pmix", "OMPI_MCA_initial_wdir",
                          "OMPI_MCA_shmem_RUNTIME_QUERY_hint", "OMPI_MCA_mpi_oversubscribe", "OMPI_MCA_prte_"})
      if (starts_with(name, p)) return true;
    return false;
  }
  if (starts_with(name, "PMIX_")) return !starts_with(name, "PMIX_MCA_");
  for (const char* p : {"PMI_", "PRTE_", "HYDI_", "HYDRA_", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"})
    if (starts_with(name, p)) return true;
  // srun's description of one task; the SLURM_JOB_* a nested srun needs stay.
  return name == "SLURM_PROCID" || name == "SLURM_LOCALID";
}

std::string default_launcher() {
  if (std::getenv("SLURM_JOB_ID")) return "srun --ntasks={ranks}";
  return "mpirun -np {ranks}";
}

std::vector<std::string> child_command(const std::string& launcher, int64_t ranks, const std::string& exe,
                                       const std::vector<std::string>& args) {
  std::vector<std::string> argv;
  if (ranks > 1) {
    std::istringstream words(launcher);
    for (std::string w; words >> w;) {
      for (size_t at; (at = w.find("{ranks}")) != std::string::npos;) w.replace(at, 7, std::to_string(ranks));
      argv.push_back(w);
    }
  }
  argv.push_back(exe);
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

std::string self_exe() {
  std::string path(4096, '\0');
  const ssize_t n = readlink("/proc/self/exe", path.data(), path.size() - 1);
  if (n <= 0) throw std::runtime_error("sweep: cannot read /proc/self/exe to launch the points");
  path.resize(static_cast<size_t>(n));
  return path;
}

void forward_interrupts_to_children() {
  struct sigaction sa = {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: waitpid returns EINTR, and the child hears of it
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

ChildExit run_child(const std::vector<std::string>& argv, const std::string& log_path) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string kv(*e);
    if (!is_launcher_variable(kv.substr(0, kv.find('=')))) env.push_back(kv);
  }
  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const auto& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log < 0) throw std::runtime_error("sweep: cannot write " + log_path);
  const pid_t pid = fork();
  if (pid < 0) {
    close(log);
    throw std::runtime_error("sweep: fork failed launching " + argv.front());
  }
  if (pid == 0) {
    dup2(log, STDOUT_FILENO);
    dup2(log, STDERR_FILENO);
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);  // a launcher must not read the sweep's stdin
    widen_affinity();
    execvpe(cargv[0], cargv.data(), cenv.data());
    const std::string msg = "sweep: cannot run " + argv.front() + ": " + std::strerror(errno) + "\n";
    (void)!write(STDERR_FILENO, msg.data(), msg.size());
    _exit(127);
  }
  close(log);
  ChildExit out;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error("sweep: waitpid failed for " + argv.front());
    if (g_interrupt && !out.interrupted) {
      out.interrupted = true;
      kill(pid, static_cast<int>(g_interrupt));
    }
  }
  if (g_interrupt) out.interrupted = true;
  out.exit = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  out.last_line = why_from_log(log_path);
  return out;
}

}  // namespace gpuledger::cli
