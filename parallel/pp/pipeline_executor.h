// PipelineExecutor: one rank's walk over its stage's schedule table
// (schedule.h) for one step, and the point-to-point staging it needs
// (account comm, docs/exact-budget.md "Communication staging"; p > 1): the
// send/recv buffers of e·b·s_l·h each (s_l = s/cp, the rank's tokens under
// context parallelism, and /t under sp) — first stage
// send-activation + recv-gradient, last recv-activation + send-gradient,
// middle all four ("pp.send_act", "pp.recv_grad", "pp.recv_act",
// "pp.send_grad").
//   Forward j  -> (not first stage) receive the activation from stage − 1
//                 into the recv buffer; the tokens of microbatch j — the
//                 run's token file (models/io/token_file.h) or the
//                 synthetic chain (models/transformer/data.h) — (global sample offset
//                 dp_rank·m·b + j·b); StageModel::forward; (not last) send
//                 the output to stage + 1.
//   Backward j -> (not last) receive the output gradient from stage + 1;
//                 StageModel::backward with d(token loss) = 1/(tokens of the
//                 global batch), so the loss is the mean over the global
//                 batch and the sum over DP replicas is its gradient; (not
//                 first) send the input gradient to stage − 1.
// The receives, computes and sends run in the order of the stage's
// pipe_program (p2p.h), which no pair of ranks can deadlock.
// With virtual stages (layout.vpp > 1) the table is the interleaved one and
// each step names a model chunk: the forward and backward run that chunk
// (StageModel slot chunk·m + microbatch), the peers are those of
// pipe_messages (rank p − 1's chunk c sends to rank 0's chunk c + 1), and
// every rank holds all four buffers, since every rank then receives and
// sends both ways — still one message each: a buffer is reused once its
// message has gone (docs/exact-budget.md "Communication staging").
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/model_config.h"
#include "core/run_config.h"
#include "kernels/device.h"
#include "models/transformer/data.h"
#include "models/transformer/model.h"
#include "parallel/context/rank_context.h"

namespace gpuledger {

class PipelineExecutor {
 public:
  // Allocates the rank's send/recv buffers (none when p = 1). Throws OutOfMemory.
  PipelineExecutor(Device& dev, const RankContext& ctx, const ModelConfig& model, const RunConfig& run);

  // Runs the table of step `step_index` on `stage`; returns the sum of the
  // token losses of the rank's microbatches (last stage; 0 elsewhere). On a
  // failure (an OutOfMemory mid-schedule) drops the microbatches in flight,
  // so the model is usable again, and rethrows.
  double run(StageModel& stage, int64_t step_index);

 private:
  double run_program(StageModel& stage, int64_t step_index);

  Device& dev_;
  RankContext ctx_;
  RunConfig run_;
  int64_t msg_elems_ = 0;  // b·s_l·h per message
  DType e_;
  Buffer send_act_, recv_act_, send_grad_, recv_grad_;
  std::unique_ptr<TokenSource> data_;  // run.tokens' file, or the synthetic chain
};

}  // namespace gpuledger
