// Runs the gpuledger binary (see run_cli.h): fork/exec with stdout and stderr
// redirected to files, so large outputs never block on a pipe.
#include "run_cli.h"

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace gpuledger::testing {

namespace {
std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

std::string scratch_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("gpuledger-test-" + std::to_string(getpid())) / name;
  std::filesystem::create_directories(dir);
  return dir.string();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

CliResult run_cli(const std::vector<std::string>& args) {
  static int counter = 0;
  const std::string dir = scratch_dir("io");
  const std::string out_path = dir + "/out" + std::to_string(counter) + ".txt";
  const std::string err_path = dir + "/err" + std::to_string(counter++) + ".txt";
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    if (!freopen(out_path.c_str(), "w", stdout) || !freopen(err_path.c_str(), "w", stderr)) _exit(127);
    std::vector<char*> argv;
    std::string bin = GPULEDGER_BIN;
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  int wstatus = 0;
  waitpid(pid, &wstatus, 0);
  CliResult r;
  r.status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  return r;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

}  // namespace gpuledger::testing
