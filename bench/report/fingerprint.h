// When and where a report was made: the UTC time, the batch job (Slurm, PBS,
// LSF), the hosts, and the machine's fingerprint — what decides how fast a
// step runs (CPU model and the ISA extensions the kernels use, the BLAS and
// the kernel family it chose, threads, GPUs, driver, CUDA and NCCL versions).
// Every report carries it under env; `gpuledger regress` refuses a baseline
// whose fingerprint differs (docs/regress.md), and sweeps record it per point.
#pragma once
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpuledger::report {

// "2026-12-01T17:05:09Z"
std::string utc_timestamp();

// The batch system's job id: SLURM_JOB_ID, PBS_JOBID or LSB_JOBID, in that order;
// "" outside a job. `env` is the environment to read (tests pass their own).
std::string job_id(const std::map<std::string, std::string>& env);
std::map<std::string, std::string> process_environment();

// From the text of /proc/cpuinfo: the model ("model name" on x86, "Hardware"
// or "CPU part" elsewhere) and which of the ISA extensions that matter to the
// kernels the flags list ("flags" on x86, "Features" on Arm), in a fixed order.
struct CpuInfo {
  std::string model;
  std::vector<std::string> isa;
};
CpuInfo parse_cpuinfo(const std::string& text);

// env.fingerprint: {cpu_model, isa[], logical_cpus, threads{}, blas{}, gpu{}}.
nlohmann::json machine_fingerprint();

// The fields of two fingerprints that differ, "field: a vs b" each, over the
// fields that decide speed (not the time or the job). Empty: the same machine.
std::vector<std::string> fingerprint_differences(const nlohmann::json& a, const nlohmann::json& b);

// env as make_report writes it: host, hosts, when_utc, job_id, fingerprint.
nlohmann::json environment_json();

}  // namespace gpuledger::report
