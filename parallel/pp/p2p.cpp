// pipe_messages and pipe_program (see p2p.h).
#include "parallel/pp/p2p.h"

#include <optional>
#include <stdexcept>
#include <string>

namespace gpuledger {

PipeMessages pipe_messages(const ScheduleStep& step, int64_t pp, int64_t stage, int64_t vpp) {
  const int64_t v = step.chunk * pp + stage, last = pp * vpp - 1;
  const int64_t prev = (stage + pp - 1) % pp, next = (stage + 1) % pp;
  const bool fwd = step.op == PipeOp::kForward;
  PipeMessages m;
  m.recv = fwd ? v > 0 : v < last;
  m.send = fwd ? v < last : v > 0;
  if (m.recv) m.recv_peer = fwd ? prev : next;
  if (m.send) m.send_peer = fwd ? next : prev;
  return m;
}

namespace {

// One stage during the simulation.
struct SimStage {
  std::vector<ScheduleStep> table;
  std::vector<PipeMessages> msgs;
  std::vector<PipeEvent> program;
  size_t next = 0;                   // the next op to compute
  bool received = false;             // the next op's input is in
  std::optional<size_t> pending[2];  // the op whose output waits to be sent: [0] activation, [1] gradient

  bool done() const { return next == table.size() && !pending[0] && !pending[1]; }
};

int direction(const ScheduleStep& s) { return s.op == PipeOp::kForward ? 0 : 1; }

// Stage b's next op waits for a message from its peer a; a rendezvous when a
// holds exactly that message (the same microbatch, same kind, meant for b's
// virtual stage: a's pending op is one virtual stage before (forward) or after
// (backward) b's op).
bool try_rendezvous(std::vector<SimStage>& st, int64_t b, int64_t pp) {
  SimStage& B = st[static_cast<size_t>(b)];
  if (B.next == B.table.size() || B.received || !B.msgs[B.next].recv) return false;
  const ScheduleStep& want = B.table[B.next];
  const int64_t a = B.msgs[B.next].recv_peer;
  SimStage& A = st[static_cast<size_t>(a)];
  const int dir = direction(want);
  if (!A.pending[dir]) return false;
  const ScheduleStep& have = A.table[*A.pending[dir]];
  const int64_t v_have = have.chunk * pp + a, v_want = want.chunk * pp + b;
  if (have.microbatch != want.microbatch || v_have + (dir == 0 ? 1 : -1) != v_want) return false;
  A.program.push_back({PipeAction::kSend, *A.pending[dir], b});
  B.program.push_back({PipeAction::kRecv, B.next, a});
  A.pending[dir].reset();
  B.received = true;
  return true;
}

// The stage computes its next op when its input is in and the send buffer
// that op writes is free.
bool try_compute(SimStage& S) {
  if (S.next == S.table.size()) return false;
  const PipeMessages& msg = S.msgs[S.next];
  const int dir = direction(S.table[S.next]);
  if ((msg.recv && !S.received) || (msg.send && S.pending[dir])) return false;
  S.program.push_back({PipeAction::kCompute, S.next, -1});
  if (msg.send) S.pending[dir] = S.next;
  ++S.next;
  S.received = false;
  return true;
}

}  // namespace

std::vector<PipeEvent> pipe_program(Schedule kind, int64_t pp, int64_t stage, int64_t m, int64_t vpp) {
  std::vector<SimStage> st(static_cast<size_t>(pp));
  for (int64_t r = 0; r < pp; ++r) {
    SimStage& S = st[static_cast<size_t>(r)];
    S.table = make_schedule(kind, pp, r, m, vpp);
    for (const ScheduleStep& s : S.table) S.msgs.push_back(pipe_messages(s, pp, r, vpp));
  }
  // Rounds: every rendezvous that can happen, then one compute per stage.
  // Each event is appended to its stages' programs as it happens, so the
  // programs are subsequences of this one global sequence.
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t r = 0; r < pp; ++r) progress = try_rendezvous(st, r, pp) || progress;
    for (auto& S : st) progress = try_compute(S) || progress;
  }
  for (int64_t r = 0; r < pp; ++r)
    if (!st[static_cast<size_t>(r)].done())
      throw std::logic_error("pipe_program: stage " + std::to_string(r) + " of pp " + std::to_string(pp) + ", vpp " +
                             std::to_string(vpp) + ", m " + std::to_string(m) +
                             " cannot finish with one send buffer per direction");
  return std::move(st[static_cast<size_t>(stage)].program);
}

}  // namespace gpuledger
