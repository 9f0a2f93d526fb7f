// The profiles' schemas: write → read gives the same profile, field for
// field; a malformed document is refused naming the JSON path.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "perf/profile_json.h"

using namespace gpuledger;
using namespace gpuledger::perf;
using nlohmann::json;

namespace {

DeviceProfile full_device() {
  DeviceProfile p;
  p.name = "host-a";
  p.fingerprint = {{"cpu_model", "Test CPU"}, {"threads", 2}};
  p.provenance = {kMeasured, "2026-01-02T03:04:05Z", "gpuledger calibrate --quick --out x.json"};
  DTypeFigures fp32;
  fp32.peak_flops_per_s = {123.456e9, "cores × FMA × clock"};
  fp32.gemm_efficiency = {0.8125, "best measured / peak"};
  fp32.gemm = GemmTable{false, true,
                        ShapeTable({{64, 256, 256, 1.1e9},
                                    {64, 256, 1024, 2.2e9},
                                    {256, 256, 256, 3.3e9},
                                    {256, 256, 1024, 4.4000000000000004e9}}),
                        "measured"};
  p.dtypes[DType::kFP32] = fp32;
  DTypeFigures bf16 = fp32;
  bf16.gemm.reset();
  bf16.gemm_points = {{{GemmCall{256, 688, 256, 1, false, true, DType::kBF16, false}, 6.76e-4},
                       {GemmCall{1024, 32, 256, 2, false, false, DType::kFP32, true}, 4.1e-4}},
                      "measured --for"};
  p.dtypes[DType::kBF16] = bf16;
  p.memory_bandwidth_bytes_per_s = {1.0 / 3.0 * 1e11, "STREAM read"};
  p.op_class_bandwidth[OpClass::kCopy] = {7e9, "memcpy"};
  p.fp8_gemm = DTypeFigures{{1.978e15, "datasheet"}, {0.7, "assumed"}, std::nullopt, {}};
  p.op_bandwidth["rope_forward"] = {{{65536, 2.05e9}, {524288, 5.63e9}}, "measured"};
  p.attention[AttentionKind::kFlash] = {{0.3, "assumed"}, ShapeTable({{1024, 8, 64, 5e9}}), "measured"};
  p.attention[AttentionKind::kMaterialized] = {{0.4, "assumed"}, ShapeTable(), ""};
  p.launch_floor_seconds = {0.0, "measured"};
  p.host_copy_bytes_per_s = {9e9, "memcpy"};
  return p;
}

NetworkProfile full_network() {
  NetworkProfile n;
  n.name = "host-a";
  n.fingerprint = {{"hosts", {"a"}}};
  n.provenance = {kMeasured, "2026-01-02T03:04:05Z", "mpirun -n 2 gpuledger calibrate --out x.json"};
  n.ranks_per_node = {2, "ranks on this host"};
  n.intra_node = LinkFigures{"shared-memory", {1.5e-6, "fit"}, {3.25e9, "fit"}};
  n.samples = {{CommKind::kAllReduce, 2, 8192, 2.5e-6}, {CommKind::kSend, 2, 1 << 20, 3e-4}};
  return n;
}

void expect_refused(const json& j, const std::string& needle) {
  try {
    device_profile_from_json(j, "doc");
    FAIL() << "accepted; expected a refusal naming " << needle;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(DeviceProfileJson, RoundTrip) {
  const DeviceProfile p = full_device();
  const json j = device_profile_to_json(p);
  EXPECT_EQ(j.at("schema"), "gpuledger.device_profile/1");
  const DeviceProfile back = device_profile_from_json(json::parse(j.dump()), "round trip");
  EXPECT_EQ(back, p);
  EXPECT_EQ(device_profile_to_json(back), j);
}

TEST(DeviceProfileJson, MeasuredPointsAreRefusedWhenMalformed) {
  json j = device_profile_to_json(full_device());
  json bad = j;
  bad["dtypes"]["bf16"]["gemm_points"]["points"][0][6] = "fp64";
  expect_refused(bad, "c_dtype");
  bad = j;
  bad["dtypes"]["bf16"]["gemm_points"]["points"][0].erase(8);
  expect_refused(bad, "gemm_points.points[0]");
  bad = j;
  bad["op_bandwidth_bytes_per_s"]["rope_forward"]["points"][1][0] = 100;  // bytes fall
  expect_refused(bad, "ascending");
}

TEST(NetworkProfileJson, RoundTrip) {
  const NetworkProfile n = full_network();
  const json j = network_profile_to_json(n);
  EXPECT_EQ(j.at("schema"), "gpuledger.network_profile/1");
  EXPECT_FALSE(j.at("links").contains("inter_node"));
  EXPECT_EQ(network_profile_from_json(json::parse(j.dump()), "round trip"), n);
}

TEST(DeviceProfileJson, RefusesWhatIsWrong) {
  const json good = device_profile_to_json(full_device());
  json j = good;
  j["schema"] = "gpuledger.device_profile/2";
  expect_refused(j, "$.schema");
  j = good;
  j["memory_bandwidth_bytes_per_s"]["source"] = "";
  expect_refused(j, "$.memory_bandwidth_bytes_per_s.source");
  j = good;
  j["memory_bandwith_bytes_per_s"] = j["memory_bandwidth_bytes_per_s"];  // misspelt extra field
  expect_refused(j, "memory_bandwith_bytes_per_s: unknown field");
  j = good;
  j["dtypes"]["fp8"] = j["dtypes"]["fp32"];
  expect_refused(j, "$.dtypes.fp8");
  j = good;
  j["dtypes"]["fp32"]["gemm_efficiency"]["value"] = 1.5;
  expect_refused(j, "gemm_efficiency");
  j = good;
  j["dtypes"]["fp32"]["gemm_table"]["points"].erase(0);  // no longer a full grid
  expect_refused(j, "full grid");
  j = good;
  j["provenance"]["kind"] = "guessed";
  expect_refused(j, "$.provenance.kind");
}

TEST(NetworkProfileJson, RefusesBadRanksPerNode) {
  json j = network_profile_to_json(full_network());
  j["ranks_per_node"]["value"] = 2.5;
  EXPECT_THROW(network_profile_from_json(j, "doc"), std::invalid_argument);
  j = network_profile_to_json(full_network());
  j["links"].erase("intra_node");
  EXPECT_THROW(network_profile_from_json(j, "doc"), std::invalid_argument);
}
