// The point-to-point messages of a pipeline step, as a pure program per rank.
//
// Messages go over blocking Comm send/recv, and a large (rendezvous) send
// waits until its receiver reaches the matching receive. Megatron pairs them
// with batched isend/irecv (p2p_communication.py); here every rank instead
// derives, from all ranks' schedule tables, one order of its receives,
// computes and sends such that the ranks' calls are subsequences of one
// global sequence of rendezvous (pipe_program): played with blocking sends no
// rank waits forever, and since each pair of ranks meets in that one order,
// the k-th message from a rank to another is the one the other's k-th receive
// from it expects (MPI matches one tag in order). Each rank holds one send
// buffer per direction (activation, gradient), so a send must go before the
// next compute that writes its buffer, and a receive comes just before the
// compute that reads it.
//
// With virtual stages (vpp > 1) the pipeline is a ring: rank p − 1's chunk c
// feeds rank 0's chunk c + 1, so ranks 0 and p − 1 exchange messages too, and
// one neighbour pair carries activations and gradients both ways.
// tests/parallel/test_pipe_messages.cpp plays every rank's program against
// the others with rendezvous sends for many (pp, vpp, m).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/run_config.h"
#include "parallel/pp/schedule.h"

namespace gpuledger {

// The messages of one step of stage `stage`'s table, under virtual stage
// v = chunk·pp + stage of pp·vpp: a forward receives its input from v − 1 (the
// previous rank, or rank p − 1 for chunk c > 0 of rank 0) and sends its output
// to v + 1; a backward receives the output gradient from v + 1 and sends the
// input gradient to v − 1. None before virtual stage 0 or after the last.
struct PipeMessages {
  bool recv = false, send = false;
  int64_t recv_peer = -1, send_peer = -1;  // ranks in the pipeline group
};
PipeMessages pipe_messages(const ScheduleStep& step, int64_t pp, int64_t stage, int64_t vpp);

enum class PipeAction { kRecv, kCompute, kSend };
struct PipeEvent {
  PipeAction action = PipeAction::kCompute;
  size_t step = 0;    // index in the stage's table: the op computed, receiving, or whose output is sent
  int64_t peer = -1;  // kRecv, kSend
  bool operator==(const PipeEvent&) const = default;
};

// The program of stage `stage`: its table's computes, each receive right
// before the compute that needs it, each send placed where the global
// simulation of all stages met its receiver. Throws std::logic_error if the
// tables cannot be run with one buffer per direction (no table of
// make_schedule does; the test above checks many).
std::vector<PipeEvent> pipe_program(Schedule kind, int64_t pp, int64_t stage, int64_t m, int64_t vpp);

}  // namespace gpuledger
