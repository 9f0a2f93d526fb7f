// PipelineExecutor (see pipeline_executor.h).
#include "parallel/pp/pipeline_executor.h"

#include <memory>

#include "models/io/token_file.h"
#include "parallel/pp/p2p.h"
#include "parallel/pp/schedule.h"

namespace gpuledger {

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
  const int64_t s_l = l.sp ? run.seq / l.tp : run.seq;
  msg_elems_ = run.mbs * s_l * model.hidden;
  const int64_t msg = dtype_bytes(e_) * msg_elems_;
  if (!ctx.last_stage()) {
    send_act_ = dev.alloc(msg, Account::kComm, "pp.send_act");
    recv_grad_ = dev.alloc(msg, Account::kComm, "pp.recv_grad");
  }
  if (!ctx.first_stage()) {
    recv_act_ = dev.alloc(msg, Account::kComm, "pp.recv_act");
    send_grad_ = dev.alloc(msg, Account::kComm, "pp.send_grad");
  }
}

double PipelineExecutor::run(StageModel& stage, int64_t step_index) {
  PipeChannel chan(*ctx_.pp, ctx_.coords.pp);
  try {
    const double loss_sum = run_table(stage, step_index, chan);
    chan.flush();
    return loss_sum;
  } catch (...) {
    chan.abandon();
    for (int64_t j = 0; j < run_.microbatches; ++j) stage.discard(j);
    throw;
  }
}

double PipelineExecutor::run_table(StageModel& stage, int64_t step_index, PipeChannel& chan) {
  const int64_t m = run_.microbatches, b = run_.mbs, s = run_.seq, l_dp = ctx_.layout.dp;
  const int64_t gbs = run_.global_batch(l_dp);
  const auto loss_scale = static_cast<float>(1.0 / static_cast<double>(run_.tokens_per_step(l_dp)));
  const int64_t replica_first = ctx_.coords.dp * m * b;
  const int64_t me = ctx_.coords.pp;
  const bool first = ctx_.first_stage(), last = ctx_.last_stage();
  std::vector<int32_t> ids(static_cast<size_t>(b * s)), targets(static_cast<size_t>(b * s));
  double loss_sum = 0.0;
  for (const ScheduleStep& op : make_schedule(run_.schedule, ctx_.layout.pp, me, m)) {
    if (op.op == PipeOp::kForward) {
      const int64_t offset = replica_first + op.microbatch * b;
      if (!first) chan.recv(recv_act_.data(), msg_elems_, e_, me - 1);
      chan.flush();  // the forward rewrites the send buffer
      if (dev_.touches_memory() && (first || last))
        data_->batch(step_index, gbs, offset, b, s, ids.data(), targets.data());
      loss_sum += stage.forward(op.microbatch, step_index, offset, ids.data(), targets.data(),
                                first ? nullptr : recv_act_.data(), last ? nullptr : send_act_.data());
      if (!last) chan.send(send_act_.data(), msg_elems_, e_, me + 1);
    } else {
      if (!last) chan.recv(recv_grad_.data(), msg_elems_, e_, me + 1);
      chan.flush();
      stage.backward(op.microbatch, loss_scale, last ? nullptr : recv_grad_.data(),
                     first ? nullptr : send_grad_.data());
      if (!first) chan.send(send_grad_.data(), msg_elems_, e_, me - 1);
    }
  }
  return loss_sum;
}

}  // namespace gpuledger
