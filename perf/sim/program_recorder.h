// ProgramRecorder: a step-program sink (core/step_program.h) that prices what
// one simulated rank issues — each op with the device profile (perf/op_time.h
// op_seconds), each communication call with the network profile where its
// group lies on the nodes (perf/collective_time.h) — into the program the step
// simulator lays on clocks (perf/sim/timeline.h).
//
// How a call becomes an event:
//   - an op: kCompute on "compute" (a run of the same op back to back: one
//     event of their summed time, FLOPs and bytes);
//   - a blocking collective: kCollective on "comm <group>", channel
//     "<group>#<first world rank of the group>" (the group instance);
//   - a started collective and its wait: kCollectiveStart / kCollectiveWait,
//     the comm's handle made unique per group;
//   - a send or recv whose peer is simulated: kSend / kRecv on the channel
//     "<group> <from>><to>" (world ranks), so the n-th send there meets the
//     n-th recv — the pipeline's stages;
//   - a send or recv whose peer is not simulated (the context-parallel
//     ring: every member of the ring does the same at the same time): a
//     transfer on the group's stream that waits for no one, as the ring's
//     symmetric exchange does.
// Collectives of more than one node use NCCL's ring rules (group_collective_seconds).
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/step_program.h"
#include "perf/device_profile.h"
#include "perf/network_profile.h"
#include "perf/sim/timeline.h"

namespace gpuledger::perf {

class ProgramRecorder final : public StepProgramSink {
 public:
  // `simulated`: the world ranks the step simulation runs together (their
  // programs meet on channels); `world_rank` and `role` name this one.
  ProgramRecorder(const DeviceProfile& device, const NetworkProfile& network, std::set<int64_t> simulated,
                  int64_t world_rank, std::string role);

  // Calls arrive only while recording (the set-up before the step is left out).
  void set_recording(bool on) { recording_ = on; }

  void on_op(const OpCost& op) override;
  void on_comm(const CommCall& call) override;

  const SimRank& program() const { return program_; }
  SimRank take_program() { return std::move(program_); }
  int64_t recorded_flops() const { return flops_; }
  int64_t recorded_ops() const { return ops_; }  // ops reported while recording (runs not merged)

 private:
  const GroupPlacement& placement(const CommCall& call);
  double transfer_seconds(const CommCall& call);
  int64_t unique_handle(const CommCall& call);

  const DeviceProfile& device_;
  const NetworkProfile& network_;
  std::set<int64_t> simulated_;
  SimRank program_;
  bool recording_ = false;
  int64_t flops_ = 0, ops_ = 0;
  std::map<std::pair<std::string, int64_t>, GroupPlacement> placements_;  // by (group, first member)
  std::map<std::pair<std::string, int64_t>, int64_t> handles_;            // (group, comm handle) → unique
  int64_t next_handle_ = 0;
};

}  // namespace gpuledger::perf
