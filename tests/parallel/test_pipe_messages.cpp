// The point-to-point calls of every pipeline rank, as the executor makes them
// (parallel/pp/pipeline_executor.cpp walks the rank's pipe_program), checked
// for their place (a receive just before its compute, a send after its
// compute and before its buffer is rewritten), then played against each
// other with blocking (rendezvous) sends — the strictest MPI semantics,
// under which a send waits for its receive: no rank may wait forever, and the
// k-th message from one rank to another must be the one the other's k-th
// receive from it expects (MPI matches one tag in order). Checked for the
// 1F1B and interleaved tables over many (pp, vpp, m), and pipe_messages
// itself against hand-written peers.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "parallel/pp/p2p.h"
#include "parallel/pp/schedule.h"

namespace gpuledger {
namespace {

// What a message carries: activation (0) or gradient (1), the microbatch and
// the virtual stage that consumes it.
struct MessageId {
  int kind = 0;
  int64_t microbatch = 0, consumer = 0;
  bool operator==(const MessageId&) const = default;
};

struct Call {
  bool send = false;
  int64_t peer = 0;
  MessageId id;
};

// The rank's calls: its pipe_program's receives and sends, each with the
// message it carries or expects.
std::vector<Call> rank_calls(Schedule kind, int64_t pp, int64_t stage, int64_t m, int64_t vpp) {
  const auto table = make_schedule(kind, pp, stage, m, vpp);
  std::vector<Call> calls;
  std::vector<bool> computed(table.size(), false), received(table.size(), false), sent(table.size(), false);
  for (const PipeEvent& ev : pipe_program(kind, pp, stage, m, vpp)) {
    const ScheduleStep& op = table.at(ev.step);
    const PipeMessages msg = pipe_messages(op, pp, stage, vpp);
    const int64_t v = op.chunk * pp + stage;
    const int k = op.op == PipeOp::kForward ? 0 : 1;
    switch (ev.action) {
      case PipeAction::kRecv:  // right before its compute, once
        EXPECT_TRUE(msg.recv && msg.recv_peer == ev.peer && !received[ev.step] && !computed[ev.step]);
        EXPECT_TRUE(ev.step == 0 || computed[ev.step - 1]) << "receive ahead of its turn";
        received[ev.step] = true;
        calls.push_back({false, ev.peer, {k, op.microbatch, v}});
        break;
      case PipeAction::kCompute:  // in table order, after its receive
        EXPECT_TRUE(ev.step == 0 || computed[ev.step - 1]);
        EXPECT_EQ(received[ev.step], msg.recv);
        computed[ev.step] = true;
        break;
      case PipeAction::kSend:  // after its compute, once
        EXPECT_TRUE(msg.send && msg.send_peer == ev.peer && computed[ev.step] && !sent[ev.step]);
        sent[ev.step] = true;
        calls.push_back({true, ev.peer, {k, op.microbatch, k == 0 ? v + 1 : v - 1}});
        break;
    }
  }
  for (size_t i = 0; i < table.size(); ++i) {
    EXPECT_TRUE(computed[i]);
    EXPECT_EQ(sent[i], pipe_messages(table[i], pp, stage, vpp).send);
  }
  // one send buffer per direction: a send goes before the next compute that writes its buffer
  std::vector<int> last_unsent(2, -1);
  for (const PipeEvent& ev : pipe_program(kind, pp, stage, m, vpp)) {
    const int k = table[ev.step].op == PipeOp::kForward ? 0 : 1;
    const bool sends = pipe_messages(table[ev.step], pp, stage, vpp).send;
    if (ev.action == PipeAction::kCompute && sends) {
      EXPECT_EQ(last_unsent[k], -1) << "step " << ev.step << " overwrites an unsent buffer";
      last_unsent[k] = static_cast<int>(ev.step);
    }
    if (ev.action == PipeAction::kSend) last_unsent[k] = -1;
  }
  return calls;
}

// Plays the ranks' calls with rendezvous sends; returns "" or what went wrong.
std::string play(const std::vector<std::vector<Call>>& calls) {
  const size_t n = calls.size();
  std::vector<size_t> at(n, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t a = 0; a < n; ++a) {
      if (at[a] >= calls[a].size() || !calls[a][at[a]].send) continue;
      const Call& s = calls[a][at[a]];
      const auto b = static_cast<size_t>(s.peer);
      if (at[b] >= calls[b].size()) continue;
      const Call& r = calls[b][at[b]];
      if (r.send || r.peer != static_cast<int64_t>(a)) continue;
      if (!(r.id == s.id))
        return "rank " + std::to_string(b) + " expected (" + std::to_string(r.id.kind) + ", mb " +
               std::to_string(r.id.microbatch) + ", v " + std::to_string(r.id.consumer) + ") from rank " +
               std::to_string(a) + ", got (" + std::to_string(s.id.kind) + ", mb " + std::to_string(s.id.microbatch) +
               ", v " + std::to_string(s.id.consumer) + ")";
      ++at[a];
      ++at[b];
      progress = true;
    }
  }
  for (size_t a = 0; a < n; ++a)
    if (at[a] != calls[a].size())
      return "deadlock: rank " + std::to_string(a) + " waits at call " + std::to_string(at[a]);
  return "";
}

TEST(PipeMessages, EveryRankGetsItsMessagesWithoutWaitingForever) {
  for (int64_t pp : {2, 3, 4, 8})
    for (int64_t vpp : {1, 2, 3, 4})
      for (int64_t m = pp; m <= 3 * pp; m += pp) {
        std::vector<std::vector<Call>> calls;
        int64_t messages = 0;
        for (int64_t st = 0; st < pp; ++st) {
          calls.push_back(rank_calls(Schedule::k1F1B, pp, st, m, vpp));
          for (const Call& c : calls.back()) messages += c.send ? 1 : 0;
        }
        EXPECT_EQ(play(calls), "") << "pp " << pp << " vpp " << vpp << " m " << m;
        // every virtual-stage boundary carries one activation and one gradient per microbatch
        EXPECT_EQ(messages, 2 * m * (pp * vpp - 1)) << "pp " << pp << " vpp " << vpp << " m " << m;
      }
  for (int64_t pp : {2, 4})
    for (int64_t m = 1; m <= 5; ++m) {
      std::vector<std::vector<Call>> calls;
      for (int64_t st = 0; st < pp; ++st) calls.push_back(rank_calls(Schedule::kGPipe, pp, st, m, 1));
      EXPECT_EQ(play(calls), "") << "gpipe pp " << pp << " m " << m;
    }
}

TEST(PipeMessages, PeersOfVirtualStages) {
  // pp 4, vpp 2: virtual stages 0…7; rank 3's chunk 0 (v 3) feeds rank 0's chunk 1 (v 4)
  auto f = [](int64_t stage, int64_t chunk) { return pipe_messages({PipeOp::kForward, 0, chunk}, 4, stage, 2); };
  auto b = [](int64_t stage, int64_t chunk) { return pipe_messages({PipeOp::kBackward, 0, chunk}, 4, stage, 2); };
  EXPECT_FALSE(f(0, 0).recv);
  EXPECT_EQ(f(0, 0).send_peer, 1);
  EXPECT_EQ(f(3, 0).send_peer, 0);
  EXPECT_EQ(f(0, 1).recv_peer, 3);
  EXPECT_FALSE(f(3, 1).send);
  EXPECT_EQ(f(3, 1).recv_peer, 2);
  EXPECT_FALSE(b(3, 1).recv);
  EXPECT_EQ(b(3, 1).send_peer, 2);
  EXPECT_EQ(b(0, 1).send_peer, 3);
  EXPECT_EQ(b(3, 0).recv_peer, 0);
  EXPECT_FALSE(b(0, 0).send);
  // vpp 1: a line, no wrap
  EXPECT_FALSE(pipe_messages({PipeOp::kForward, 0, 0}, 4, 3, 1).send);
  EXPECT_FALSE(pipe_messages({PipeOp::kBackward, 0, 0}, 4, 0, 1).send);
}

}  // namespace
}  // namespace gpuledger
