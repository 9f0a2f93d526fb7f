// Time, job and machine fingerprint of a report (see fingerprint.h).
#include "bench/report/fingerprint.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "bench/host_cpu.h"
#include "bench/report/report.h"
#include "kernels/cpu/blas_core.h"
#include "kernels/cpu/thread_policy.h"

#if GPULEDGER_HAVE_BLAS
// OpenBLAS's own queries (cblas.h is not included: the bench library does not
// see its include path). Declared as OpenBLAS's cblas.h declares them.
extern "C" char* openblas_get_config(void);
extern "C" int openblas_get_num_threads(void);
#endif
#if GPULEDGER_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#if GPULEDGER_HAVE_NCCL
#include <nccl.h>
#endif

extern char** environ;

namespace gpuledger::report {

using nlohmann::json;

namespace {

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// "key\t: value" lines (/proc/cpuinfo, /proc/driver/nvidia/gpus/*/information).
using bench::key_value_field;

json env_or_null(const std::map<std::string, std::string>& env, const char* name) {
  const auto it = env.find(name);
  return it == env.end() ? json(nullptr) : json(it->second);
}

json blas_json() {
#if GPULEDGER_HAVE_BLAS
  // The core name is the kernel family OpenBLAS's DYNAMIC_ARCH picked for this
  // CPU (e.g. "Haswell", "SkylakeX", "SapphireRapids"): the same library runs
  // different GEMMs on different machines.
  return {{"library", "OpenBLAS"},
          {"config", bench::trim_space(openblas_get_config())},
          {"corename", blas_corename()},
          {"threads", openblas_get_num_threads()}};
#else
  return {{"library", "none (built-in GEMM)"}};
#endif
}

// NVIDIA's kernel module publishes each GPU's model and its own version under
// /proc/driver/nvidia without starting a CUDA context; the CUDA and NCCL
// versions come from their libraries when this binary is built with them.
json gpu_json() {
  namespace fs = std::filesystem;
  json names = json::array();
  std::error_code ec;
  const fs::path gpus = "/proc/driver/nvidia/gpus";
  std::vector<std::string> found;
  if (fs::is_directory(gpus, ec))
    for (const auto& entry : fs::directory_iterator(gpus, ec)) {
      const std::string model = key_value_field(read_text(entry.path() / "information"), "Model");
      if (!model.empty()) found.push_back(model);
    }
  std::sort(found.begin(), found.end());
  for (const auto& n : found) names.push_back(n);
  json g = {{"names", names}};
  // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 ..."
  const std::string version = read_text("/proc/driver/nvidia/version");
  const auto at = version.find("Kernel Module");
  if (at != std::string::npos) {
    std::istringstream words(version.substr(at + 13));
    std::string v;
    words >> v;
    g["driver"] = v;
  } else {
    g["driver"] = nullptr;
  }
#if GPULEDGER_HAVE_CUDA
  int driver = 0, runtime = 0;
  // Neither call creates a context; a failure (no driver) leaves the version unknown.
  g["cuda_driver"] = cudaDriverGetVersion(&driver) == cudaSuccess ? json(driver) : json(nullptr);
  g["cuda_runtime"] = cudaRuntimeGetVersion(&runtime) == cudaSuccess ? json(runtime) : json(nullptr);
#else
  g["cuda_runtime"] = "not built";
#endif
#if GPULEDGER_HAVE_NCCL
  int nccl = 0;
  g["nccl"] = ncclGetVersion(&nccl) == ncclSuccess ? json(nccl) : json(nullptr);
#else
  g["nccl"] = "not built";
#endif
  return g;
}

void flatten(const json& j, const std::string& path, std::map<std::string, std::string>& out) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) flatten(v, path.empty() ? k : path + "." + k, out);
  } else {
    out[path] = j.dump();
  }
}

}  // namespace

std::string utc_timestamp() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::map<std::string, std::string> process_environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    const auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

std::string job_id(const std::map<std::string, std::string>& env) {
  for (const char* name : {"SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID"}) {
    const auto it = env.find(name);
    if (it != env.end() && !it->second.empty()) return it->second;
  }
  return "";
}

CpuInfo parse_cpuinfo(const std::string& text) {
  CpuInfo c;
  c.model = key_value_field(text, "model name");
  if (c.model.empty()) c.model = key_value_field(text, "Hardware");
  if (c.model.empty()) {
    const std::string part = key_value_field(text, "CPU part");
    if (!part.empty()) c.model = key_value_field(text, "CPU implementer") + "/" + part;
  }
  if (c.model.empty()) c.model = "unknown";
  std::string flags = key_value_field(text, "flags");
  if (flags.empty()) flags = key_value_field(text, "Features");
  std::istringstream words(" " + flags + " ");
  std::vector<std::string> have;
  for (std::string w; words >> w;) have.push_back(w);
  // The extensions the CPU kernels and OpenBLAS's kernel choice depend on.
  for (const char* want : {"avx2", "fma", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16", "asimd", "sve"})
    if (std::find(have.begin(), have.end(), want) != have.end()) c.isa.push_back(want);
  return c;
}

json machine_fingerprint() {
  const CpuInfo cpu = parse_cpuinfo(read_text("/proc/cpuinfo"));
  const auto env = process_environment();
  json f;
  f["cpu_model"] = cpu.model;
  f["isa"] = cpu.isa;
  f["logical_cpus"] = std::thread::hardware_concurrency();
  // The policy first: it sets the BLAS's thread count that blas_json reads.
  const CpuThreadPolicy& policy = apply_cpu_thread_policy();
  f["threads"] = {{"OMP_NUM_THREADS", env_or_null(env, "OMP_NUM_THREADS")},
                  {"OPENBLAS_NUM_THREADS", env_or_null(env, "OPENBLAS_NUM_THREADS")},
                  {"policy", policy.describe()}};
  f["blas"] = blas_json();
  f["gpu"] = gpu_json();
  return f;
}

std::vector<std::string> fingerprint_differences(const json& a, const json& b) {
  std::map<std::string, std::string> fa, fb;
  flatten(a, "", fa);
  flatten(b, "", fb);
  std::vector<std::string> out;
  for (const auto& [k, v] : fa) {
    const auto it = fb.find(k);
    const std::string w = it == fb.end() ? "(absent)" : it->second;
    if (v != w) out.push_back(k + ": " + v + " vs " + w);
  }
  for (const auto& [k, v] : fb)
    if (!fa.count(k)) out.push_back(k + ": (absent) vs " + v);
  return out;
}

json environment_json() {
  const std::string host = host_name();
  const std::string job = job_id(process_environment());
  return {{"host", host},
          {"hosts", json::array({host})},
          {"when_utc", utc_timestamp()},
          {"job_id", job.empty() ? json(nullptr) : json(job)},
          {"fingerprint", machine_fingerprint()}};
}

}  // namespace gpuledger::report
