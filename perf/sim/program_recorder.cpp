// Pricing a rank's reported calls into a simulated program (see program_recorder.h).
#include "perf/sim/program_recorder.h"

#include <stdexcept>

#include "perf/collective_time.h"
#include "perf/op_time.h"

namespace gpuledger::perf {

ProgramRecorder::ProgramRecorder(const DeviceProfile& device, const NetworkProfile& network,
                                 std::set<int64_t> simulated, int64_t world_rank, std::string role)
    : device_(device), network_(network), simulated_(std::move(simulated)) {
  program_.rank = world_rank;
  program_.role = std::move(role);
}

void ProgramRecorder::on_op(const OpCost& op) {
  if (!recording_) return;
  const double seconds = op_seconds(device_, op);
  flops_ += op.flops;
  ops_ += 1;
  // A run of the same op back to back on the compute stream is one event: the
  // step is the same, and a layout that copies one piece per rank of a large
  // group (2048 staging copies per bucket) stays a program of manageable size.
  auto& prog = program_.program;
  if (!prog.empty() && prog.back().kind == SimEventKind::kCompute && prog.back().name == op.name) {
    prog.back().seconds += seconds;
    prog.back().flops += op.flops;
    prog.back().bytes += op.bytes;
    return;
  }
  SimEvent e;
  e.kind = SimEventKind::kCompute;
  e.name = std::string(op.name);
  e.seconds = seconds;
  e.flops = op.flops;
  e.bytes = op.bytes;
  prog.push_back(std::move(e));
}

const GroupPlacement& ProgramRecorder::placement(const CommCall& call) {
  if (!call.members || call.members->empty())
    throw std::invalid_argument("ProgramRecorder: a call on '" + std::string(call.group) + "' without its members");
  const auto key = std::make_pair(std::string(call.group), call.members->front());
  auto it = placements_.find(key);
  if (it == placements_.end())
    it = placements_.emplace(key, place_members(*call.members, network_.ranks_per_node_count())).first;
  return it->second;
}

// A send or recv moves its message between two ranks: the pair's placement.
double ProgramRecorder::transfer_seconds(const CommCall& call) {
  if (call.kind == CommKind::kSend || call.kind == CommKind::kRecv) {
    const GroupPlacement pair = place_members({call.world_rank, call.peer_world_rank}, network_.ranks_per_node_count());
    return group_collective_seconds(network_, call.kind, call.bytes, pair);
  }
  return group_collective_seconds(network_, call.kind, call.bytes, placement(call));
}

int64_t ProgramRecorder::unique_handle(const CommCall& call) {
  const auto key = std::make_pair(std::string(call.group), call.handle);
  if (call.mode == CommMode::kStart) return handles_[key] = next_handle_++;
  const auto it = handles_.find(key);
  if (it == handles_.end())
    throw std::invalid_argument("ProgramRecorder: a wait on '" + std::string(call.group) + "' for handle " +
                                std::to_string(call.handle) + " never started");
  return it->second;
}

void ProgramRecorder::on_comm(const CommCall& call) {
  if (!recording_) return;
  const std::string group(call.group);
  SimEvent e;
  e.name = std::string(comm_kind_name(call.kind));
  e.stream = comm_stream(group);
  e.bytes = call.bytes;
  const bool p2p = call.kind == CommKind::kSend || call.kind == CommKind::kRecv;
  const bool peer_simulated = p2p && simulated_.count(call.peer_world_rank) > 0;
  if (call.mode == CommMode::kWait) {
    e.kind = SimEventKind::kCollectiveWait;
    e.handle = unique_handle(call);
    program_.program.push_back(std::move(e));
    return;
  }
  e.seconds = transfer_seconds(call);
  if (call.mode == CommMode::kBlocking && peer_simulated) {
    const bool send = call.kind == CommKind::kSend;
    const int64_t from = send ? call.world_rank : call.peer_world_rank;
    const int64_t to = send ? call.peer_world_rank : call.world_rank;
    e.kind = send ? SimEventKind::kSend : SimEventKind::kRecv;
    e.channel = group + " " + std::to_string(from) + ">" + std::to_string(to);
    if (!send) e.seconds = 0;  // the send's transfer is the one timed
    program_.program.push_back(std::move(e));
    return;
  }
  // A collective, or a transfer to a rank that is not simulated: its members
  // meet on the group instance's channel; a p2p call meets no one.
  e.channel =
      p2p ? group + " p2p of " + std::to_string(call.world_rank) : group + "#" + std::to_string(call.members->front());
  if (call.mode == CommMode::kStart) {
    e.kind = SimEventKind::kCollectiveStart;
    e.handle = unique_handle(call);
  } else {
    e.kind = SimEventKind::kCollective;
  }
  program_.program.push_back(std::move(e));
}

}  // namespace gpuledger::perf
