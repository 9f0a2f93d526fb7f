// PipelineExecutor (see pipeline_executor.h).
#include "parallel/pp/pipeline_executor.h"

#include <algorithm>
#include <memory>

#include "models/io/token_file.h"
#include "parallel/pp/p2p.h"
#include "parallel/pp/schedule.h"

namespace gpuledger {
namespace {
// p = 1: the table's computes, nothing to send or receive.
std::vector<PipeEvent> trivial_program(size_t steps) {
  std::vector<PipeEvent> p(steps);
  for (size_t i = 0; i < steps; ++i) p[i].step = i;
  return p;
}

// Context parallelism (cp > 1): the rank's two chunks of each of the b
// sequences moved to the front of v (core/layout.h cp_local_tokens).
void keep_cp_tokens(const RankContext& ctx, int64_t b, int64_t s, std::vector<int32_t>& v) {
  if (ctx.layout.cp < 2) return;
  const CpChunks c = cp_token_chunks(s, ctx.layout.cp, ctx.coords.cp);
  std::vector<int32_t> local(static_cast<size_t>(b * 2 * c.chunk_tokens));
  cp_local_tokens(c, b, s, v.data(), local.data());
  std::copy(local.begin(), local.end(), v.begin());
}
}  // namespace

PipelineExecutor::PipelineExecutor(Device& dev, const RankContext& ctx, const ModelConfig& model, const RunConfig& run)
    : dev_(dev), ctx_(ctx), run_(run), e_(run.dtype) {
  if (run.tokens.empty()) {
    data_ = std::make_unique<BigramData>(model.vocab, run.seed);
  } else {
    auto file = std::make_unique<TokenFile>(run.tokens);
    file->check_for(run.seq, model.vocab);
    data_ = std::move(file);
  }
  const Layout& l = ctx.layout;
  if (l.pp < 2) return;
  // The stage's residual stream: the rank's s/cp tokens under context
  // parallelism (every stage runs its own ring), a 1/t shard of them under sp.
  const int64_t s_r = run.seq / l.cp;
  const int64_t s_l = l.sp ? s_r / l.tp : s_r;
  msg_elems_ = run.mbs * s_l * model.hidden;
  const int64_t msg = dtype_bytes(e_) * msg_elems_;
  // With virtual stages every rank both sends and receives each way: rank
  // p − 1's chunks feed rank 0's next chunks (pipe_messages, p2p.h).
  const bool ring = l.vpp > 1;
  if (!ctx.last_stage() || ring) {
    send_act_ = dev.alloc(msg, Account::kComm, "pp.send_act");
    recv_grad_ = dev.alloc(msg, Account::kComm, "pp.recv_grad");
  }
  if (!ctx.first_stage() || ring) {
    recv_act_ = dev.alloc(msg, Account::kComm, "pp.recv_act");
    send_grad_ = dev.alloc(msg, Account::kComm, "pp.send_grad");
  }
}

double PipelineExecutor::run(StageModel& stage, int64_t step_index) {
  try {
    return run_program(stage, step_index);
  } catch (...) {
    for (int64_t j = 0; j < run_.microbatches * ctx_.layout.vpp; ++j) stage.discard(j);
    throw;
  }
}

double PipelineExecutor::run_program(StageModel& stage, int64_t step_index) {
  const int64_t m = run_.microbatches, b = run_.mbs, s = run_.seq, l_dp = ctx_.layout.dp;
  const int64_t gbs = run_.global_batch(l_dp);
  const auto loss_scale = static_cast<float>(1.0 / static_cast<double>(run_.tokens_per_step(l_dp)));
  const int64_t replica_first = ctx_.coords.dp * m * b;
  const int64_t me = ctx_.coords.pp, pp = ctx_.layout.pp, vpp = ctx_.layout.vpp;
  const std::vector<ScheduleStep> table = make_schedule(run_.schedule, pp, me, m, vpp);
  std::vector<int32_t> ids(static_cast<size_t>(b * s)), targets(static_cast<size_t>(b * s));
  double loss_sum = 0.0;
  Comm* comm = ctx_.pp;
  for (const PipeEvent& ev : pp > 1 ? pipe_program(run_.schedule, pp, me, m, vpp) : trivial_program(table.size())) {
    const ScheduleStep& op = table[ev.step];
    const bool fwd = op.op == PipeOp::kForward;
    if (ev.action == PipeAction::kRecv) {
      comm->recv(fwd ? recv_act_.data() : recv_grad_.data(), msg_elems_, e_, ev.peer);
      continue;
    }
    if (ev.action == PipeAction::kSend) {
      comm->send(fwd ? send_act_.data() : send_grad_.data(), msg_elems_, e_, ev.peer);
      continue;
    }
    const PipeMessages msg = pipe_messages(op, pp, me, vpp);
    const int64_t slot = op.chunk * m + op.microbatch;  // one slot per (chunk, microbatch)
    if (fwd) {
      const int64_t offset = replica_first + op.microbatch * b;
      if (dev_.touches_memory() && (!msg.recv || !msg.send)) {  // the embedding's ids, the head's targets
        data_->batch(step_index, gbs, offset, b, s, ids.data(), targets.data());
        keep_cp_tokens(ctx_, b, s, ids);
        keep_cp_tokens(ctx_, b, s, targets);
      }
      loss_sum += stage.forward(slot, step_index, offset, ids.data(), targets.data(),
                                msg.recv ? recv_act_.data() : nullptr, msg.send ? send_act_.data() : nullptr, op.chunk);
    } else {
      stage.backward(slot, loss_scale, msg.recv ? recv_grad_.data() : nullptr, msg.send ? send_grad_.data() : nullptr);
    }
  }
  return loss_sum;
}

}  // namespace gpuledger
