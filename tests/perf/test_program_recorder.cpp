// The program recorder: each reported op priced by op_seconds, each call
// turned into the simulator's event with the right stream, channel and time —
// a pipeline send to a simulated stage meets its recv, a ring transfer to a
// rank not simulated waits for no one, started collectives keep their handles
// apart per group — and two recorded stages simulated together give the
// hand-computed step.
#include <gtest/gtest.h>

#include <stdexcept>

#include "perf/collective_time.h"
#include "perf/op_time.h"
#include "perf/sim/program_recorder.h"

using namespace gpuledger;
using namespace gpuledger::perf;

namespace {

DeviceProfile device() {
  DeviceProfile p;
  p.name = "test";
  p.provenance = {kPublished, "", ""};
  DTypeFigures bf16;
  bf16.peak_flops_per_s = {1e12, "test"};
  bf16.gemm_efficiency = {0.5, "test"};
  p.dtypes[DType::kBF16] = bf16;
  p.memory_bandwidth_bytes_per_s = {1e12, "test"};
  p.op_class_bandwidth[OpClass::kNorm] = {2e9, "test"};
  p.launch_floor_seconds = {1e-3, "test"};
  p.host_copy_bytes_per_s = {1e8, "test"};
  return p;
}

NetworkProfile network() {
  NetworkProfile n;
  n.name = "test";
  n.provenance = {kPublished, "", ""};
  n.ranks_per_node = {2, "test"};
  n.intra_node = LinkFigures{"shm", {1e-3, "test"}, {1e9, "test"}};
  n.inter_node = LinkFigures{"net", {2e-3, "test"}, {1e8, "test"}};
  return n;
}

OpCost norm(int64_t bytes) {
  OpCost o;
  o.name = "rmsnorm_forward";
  o.kind = OpCostKind::kMemoryBound;
  o.op_class = OpClass::kNorm;
  o.bytes = bytes;
  return o;
}

CommCall call(CommMode mode, CommKind kind, std::string_view group, int64_t bytes, const std::vector<int64_t>& members,
              int64_t me, int64_t peer = -1, int64_t handle = -1) {
  CommCall c;
  c.mode = mode;
  c.kind = kind;
  c.group = group;
  c.bytes = bytes;
  c.members = &members;
  c.world_rank = me;
  c.peer_world_rank = peer;
  c.handle = handle;
  return c;
}

}  // namespace

TEST(ProgramRecorder, PricesOpsOnlyWhileRecording) {
  const DeviceProfile d = device();
  const NetworkProfile n = network();
  ProgramRecorder r(d, n, {0}, 0, "r0");
  r.on_op(norm(1000));  // before the step: left out
  r.set_recording(true);
  OpCost g;
  g.name = "gemm";
  g.kind = OpCostKind::kGemm;
  g.dtype = DType::kBF16;
  g.m = 1000;
  g.n = 1000;
  g.k = 1000;
  g.batch = 2;
  g.flops = int64_t{4} * 1000 * 1000 * 1000;
  r.on_op(g);
  r.on_op(norm(2'000'000));
  const auto& p = r.program().program;
  ASSERT_EQ(p.size(), 2u);
  // 4e9 FLOPs at 1e12 · 0.5, batch 2 in one launch: 8 ms + the 1 ms floor.
  EXPECT_EQ(p[0].kind, SimEventKind::kCompute);
  EXPECT_DOUBLE_EQ(p[0].seconds, 4e9 / 0.5e12 + 1e-3);
  EXPECT_DOUBLE_EQ(p[0].seconds, gemm_seconds(d, 1000, 1000, 1000, DType::kBF16, 2));
  // 2 MB at the norm class's 2 GB/s + floor.
  EXPECT_DOUBLE_EQ(p[1].seconds, 2e6 / 2e9 + 1e-3);
  EXPECT_EQ(r.recorded_flops(), g.flops);
}

TEST(ProgramRecorder, PipelineSendMeetsTheSimulatedStagesRecv) {
  const DeviceProfile d = device();
  const NetworkProfile n = network();
  const std::vector<int64_t> pp = {0, 2};  // two stages on two nodes (2 ranks per node)
  ProgramRecorder s0(d, n, {0, 2}, 0, "r0"), s1(d, n, {0, 2}, 2, "r2");
  s0.set_recording(true);
  s1.set_recording(true);
  s0.on_op(norm(2'000'000));  // 2 ms
  s0.on_comm(call(CommMode::kBlocking, CommKind::kSend, "pp", 1'000'000, pp, 0, 2));
  s1.on_comm(call(CommMode::kBlocking, CommKind::kRecv, "pp", 1'000'000, pp, 2, 0));
  s1.on_op(norm(2'000'000));  // 2 ms
  const SimEvent& send = s0.program().program[1];
  EXPECT_EQ(send.kind, SimEventKind::kSend);
  EXPECT_EQ(send.channel, "pp 0>2");
  EXPECT_EQ(send.stream, "comm pp");
  // Across nodes: α_inter + 1 MB / β_inter.
  EXPECT_DOUBLE_EQ(send.seconds, 2e-3 + 1e6 / 1e8);
  const SimEvent& recv = s1.program().program[0];
  EXPECT_EQ(recv.kind, SimEventKind::kRecv);
  EXPECT_EQ(recv.channel, "pp 0>2");
  // Stage 1 starts after stage 0's 2 ms and the 12 ms transfer, then runs 2 ms.
  const SimResult sim = simulate_step({s0.take_program(), s1.take_program()});
  EXPECT_NEAR(sim.step_seconds, 2e-3 + 12e-3 + 2e-3, 1e-12);
  EXPECT_NEAR(sim.ranks[1].wait_seconds, 14e-3, 1e-12);
}

TEST(ProgramRecorder, RingTransferToARankNotSimulatedWaitsForNoOne) {
  const DeviceProfile d = device();
  const NetworkProfile n = network();
  const std::vector<int64_t> cp = {0, 1};  // one node
  ProgramRecorder r(d, n, {0}, 0, "r0");
  r.set_recording(true);
  r.on_comm(call(CommMode::kStart, CommKind::kSend, "cp", 1'000'000, cp, 0, 1, 0));
  r.on_op(norm(20'000'000));  // 11 ms, beside the transfer
  r.on_comm(call(CommMode::kWait, CommKind::kSend, "cp", 0, cp, 0, -1, 0));
  const auto& p = r.program().program;
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].kind, SimEventKind::kCollectiveStart);
  EXPECT_EQ(p[0].stream, "comm cp");
  EXPECT_DOUBLE_EQ(p[0].seconds, 1e-3 + 1e6 / 1e9);  // intra-node: 2 ms
  EXPECT_EQ(p[2].kind, SimEventKind::kCollectiveWait);
  EXPECT_EQ(p[2].handle, p[0].handle);
  const SimResult sim = simulate_step({r.take_program()});
  EXPECT_NEAR(sim.step_seconds, 11e-3, 1e-12);  // hidden behind the op
}

TEST(ProgramRecorder, StartedHandlesAreKeptApartPerGroupAndCollectivesUseTheirPlacement) {
  const DeviceProfile d = device();
  const NetworkProfile n = network();
  const std::vector<int64_t> dp = {0, 2, 4, 6};  // one rank on each of 4 nodes
  const std::vector<int64_t> tp = {0, 1};        // one node
  ProgramRecorder r(d, n, {0}, 0, "r0");
  r.set_recording(true);
  r.on_comm(call(CommMode::kStart, CommKind::kAllReduce, "dp", 4'000'000, dp, 0, -1, 0));
  r.on_comm(call(CommMode::kStart, CommKind::kAllGather, "cp", 1000, tp, 0, -1, 0));
  r.on_comm(call(CommMode::kBlocking, CommKind::kAllReduce, "tp", 1'000'000, tp, 0));
  r.on_comm(call(CommMode::kWait, CommKind::kAllReduce, "dp", 0, dp, 0, -1, 0));
  const auto& p = r.program().program;
  EXPECT_NE(p[0].handle, p[1].handle);
  EXPECT_EQ(p[3].handle, p[0].handle);
  EXPECT_EQ(p[0].channel, "dp#0");
  EXPECT_EQ(p[2].channel, "tp#0");
  EXPECT_EQ(p[2].kind, SimEventKind::kCollective);
  EXPECT_DOUBLE_EQ(p[0].seconds, group_collective_seconds(n, CommKind::kAllReduce, 4'000'000, place_members(dp, 2)));
  // The dp ring crosses 4 nodes: 2·3 steps at α_inter, 4 MB · 2·3/4 at one NIC's 100 MB/s.
  EXPECT_DOUBLE_EQ(p[0].seconds, 6 * 2e-3 + 4e6 * 1.5 / 1e8);
  EXPECT_DOUBLE_EQ(p[2].seconds, 2 * 1e-3 + 1e6 * 1.0 / 1e9);
  EXPECT_THROW(r.on_comm(call(CommMode::kWait, CommKind::kAllReduce, "dp", 0, dp, 0, -1, 7)), std::invalid_argument);
}
