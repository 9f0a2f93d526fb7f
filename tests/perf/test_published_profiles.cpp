// The published profiles: every one loads, every number in them sits in an
// object with a non-empty source, the provenance says they were not measured
// here, and the datasheet peaks are core/device_spec.h's.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/device_spec.h"
#include "perf/collective_time.h"
#include "perf/op_time.h"
#include "perf/profile_json.h"
#include "perf/published_profiles.h"

using namespace gpuledger;
using namespace gpuledger::perf;
using nlohmann::json;

namespace {

// Every number of `j` must be inside an object (the number's own or an
// enclosing one, e.g. a table's) that carries a non-empty string "source".
void expect_sourced_numbers(const json& j, const std::string& path, bool sourced, const std::string& file) {
  if (j.is_object()) {
    const bool here =
        sourced || (j.contains("source") && j["source"].is_string() && !j["source"].get<std::string>().empty());
    for (const auto& [k, v] : j.items())
      if (k != "fingerprint") expect_sourced_numbers(v, path + "." + k, here, file);
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i)
      expect_sourced_numbers(j[i], path + "[" + std::to_string(i) + "]", sourced, file);
  } else if (j.is_number()) {
    EXPECT_TRUE(sourced) << file << ": " << path << " has no source";
  }
}

}  // namespace

TEST(PublishedProfiles, TheFourDevicesAreThere) {
  EXPECT_EQ(published_profile_names(), (std::vector<std::string>{"a100-80gb", "b200", "h100-sxm", "h200"}));
  EXPECT_EQ(published_profile_files().size(), 8u);
  EXPECT_THROW(published_device_profile("v100"), std::invalid_argument);
}

TEST(PublishedProfiles, EveryNumberHasASource) {
  for (const auto& f : published_profile_files()) {
    const json j = json::parse(f.text);
    expect_sourced_numbers(j, "$", false, std::string(f.name));
    EXPECT_EQ(j.at("provenance").at("kind"), "published, not measured here") << f.name;
  }
}

TEST(PublishedProfiles, LoadAndAgreeWithTheDatasheetPresets) {
  for (const auto& name : published_profile_names()) {
    const DeviceProfile d = published_device_profile(name);
    const NetworkProfile n = published_network_profile(name);
    EXPECT_EQ(d.provenance.kind, kPublished);
    EXPECT_EQ(n.ranks_per_node_count(), 8) << name;
    const auto spec = find_device(name);
    ASSERT_TRUE(spec) << name;
    for (const auto& [dtype, f] : d.dtypes) {
      const auto peak = device_peak_flops(*spec, dtype);
      ASSERT_TRUE(peak) << name << " " << dtype_name(dtype);
      EXPECT_DOUBLE_EQ(f.peak_flops_per_s.value, *peak) << name << " " << dtype_name(dtype);
    }
    // FP8 GEMM figures exactly where the preset has FP8 tensor cores, at its FP8 peak.
    ASSERT_EQ(d.fp8_gemm.has_value(), spec->peak_fp8_flops.has_value()) << name;
    if (d.fp8_gemm) {
      EXPECT_DOUBLE_EQ(d.fp8_gemm->peak_flops_per_s.value, *spec->peak_fp8_flops) << name;
    }
    ASSERT_TRUE(spec->bandwidth_bytes_per_s);
    EXPECT_LE(d.memory_bandwidth_bytes_per_s.value, *spec->bandwidth_bytes_per_s) << name;
    // NVLink is faster than one GPU's NIC; both classes are present.
    EXPECT_GT(n.link(LinkClass::kIntraNode).busbw_bytes_per_s.value,
              n.link(LinkClass::kInterNode).busbw_bytes_per_s.value);
  }
}

TEST(PublishedProfiles, H100FiguresInUse) {
  const DeviceProfile d = published_device_profile("h100-sxm");
  const NetworkProfile n = published_network_profile("h100-sxm");
  // bf16 GEMMs by XLA's sm_90 table: (4096, 1024, 2048) at its 631.98 TFLOP/s; a GEMM past
  // the table (8192³) at its 4096³ edge, 783.33 TFLOP/s (79.2 % of the peak).
  EXPECT_DOUBLE_EQ(gemm_seconds(d, 4096, 1024, 2048, DType::kBF16), 2.0 * 4096 * 1024 * 2048 / 631.98e12);
  const double flops = 2.0 * 8192 * 8192 * 8192;
  EXPECT_DOUBLE_EQ(gemm_seconds(d, 8192, 8192, 8192, DType::kBF16), flops / 783.33e12);
  // Below the table (m = 64): the roofline at the table's best over the peak, plus the floor.
  const double small = 2.0 * 64 * 8192 * 8192;
  const double small_bytes = (64.0 * 8192 * 2 + 8192.0 * 8192) * 2;
  EXPECT_DOUBLE_EQ(gemm_seconds(d, 64, 8192, 8192, DType::kBF16),
                   std::max(small / (989.4e12 * 0.7917), small_bytes / 3.015e12) + 3e-6);
  // tp 8 all-reduce of 64 MiB inside the node: 14 NVLink steps + 64 MiB · 1.75 / 460 GB/s.
  EXPECT_DOUBLE_EQ(collective_seconds(n, CommKind::kAllReduce, 64 << 20, 8, LinkClass::kIntraNode),
                   14 * 3.4e-6 + (64 << 20) * 1.75 / 460e9);
}
