// The report's when-and-where: /proc/cpuinfo parsing on x86 and Arm, the job id's
// precedence, the fingerprint comparison the gate uses, and env's fields.
#include "bench/report/fingerprint.h"

#include <gtest/gtest.h>

#include <regex>

#include "bench/report/report.h"

namespace gpuledger::report {
namespace {

TEST(Fingerprint, ParsesX86Cpuinfo) {
  const std::string text =
      "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n"
      "flags\t\t: fpu sse avx avx2 fma avx512f avx512bw avx512_bf16 amx_bf16 amx_tile amx_int8\n"
      "processor\t: 1\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n";
  const CpuInfo c = parse_cpuinfo(text);
  EXPECT_EQ(c.model, "Intel(R) Xeon(R) Platinum 8480+");
  EXPECT_EQ(c.isa, (std::vector<std::string>{"avx2", "fma", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16"}));
}

TEST(Fingerprint, ParsesArmCpuinfoWithoutModelName) {
  const std::string text =
      "processor\t: 0\nBogoMIPS\t: 2000.00\nFeatures\t: fp asimd evtstrm aes sve\n"
      "CPU implementer\t: 0x41\nCPU part\t: 0xd40\n";
  const CpuInfo c = parse_cpuinfo(text);
  EXPECT_EQ(c.model, "0x41/0xd40");
  EXPECT_EQ(c.isa, (std::vector<std::string>{"asimd", "sve"}));
  EXPECT_EQ(parse_cpuinfo("").model, "unknown");
}

TEST(Fingerprint, JobIdFromSlurmThenPbsThenLsf) {
  EXPECT_EQ(job_id({}), "");
  EXPECT_EQ(job_id({{"LSB_JOBID", "77"}}), "77");
  EXPECT_EQ(job_id({{"PBS_JOBID", "12.pbs"}, {"LSB_JOBID", "77"}}), "12.pbs");
  EXPECT_EQ(job_id({{"SLURM_JOB_ID", "4242"}, {"PBS_JOBID", "12.pbs"}}), "4242");
  EXPECT_EQ(job_id({{"SLURM_JOB_ID", ""}, {"PBS_JOBID", "12.pbs"}}), "12.pbs");
}

TEST(Fingerprint, DifferencesNameEachField) {
  nlohmann::json a = {{"cpu_model", "A"}, {"blas", {{"corename", "Haswell"}, {"threads", 2}}}};
  EXPECT_TRUE(fingerprint_differences(a, a).empty());
  nlohmann::json b = a;
  b["blas"]["corename"] = "SkylakeX";
  b["gpu"] = {{"names", {"NVIDIA H100"}}};
  const auto d = fingerprint_differences(a, b);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0], "blas.corename: \"Haswell\" vs \"SkylakeX\"");
  EXPECT_EQ(d[1], "gpu.names: (absent) vs [\"NVIDIA H100\"]");
}

TEST(Fingerprint, EveryReportCarriesWhenAndWhere) {
  const nlohmann::json r = make_report("plan");
  const nlohmann::json& env = r.at("env");
  EXPECT_EQ(env.at("host"), host_name());
  EXPECT_EQ(env.at("hosts"), nlohmann::json::array({host_name()}));
  EXPECT_TRUE(
      std::regex_match(env.at("when_utc").get<std::string>(), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")));
  EXPECT_TRUE(env.at("job_id").is_null() || env.at("job_id").is_string());
  const nlohmann::json& f = env.at("fingerprint");
  EXPECT_FALSE(f.at("cpu_model").get<std::string>().empty());
  EXPECT_GT(f.at("logical_cpus").get<int64_t>(), 0);
  EXPECT_TRUE(f.at("isa").is_array());
  EXPECT_TRUE(f.at("blas").contains("library"));
#if GPULEDGER_HAVE_BLAS
  EXPECT_FALSE(f["blas"].at("corename").get<std::string>().empty());
#endif
  EXPECT_TRUE(f.at("gpu").at("names").is_array());
  // Taken twice on one machine, the fingerprint is the same.
  EXPECT_TRUE(fingerprint_differences(f, machine_fingerprint()).empty());
}

}  // namespace
}  // namespace gpuledger::report
