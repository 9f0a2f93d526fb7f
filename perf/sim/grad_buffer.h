// DP gradient buckets reduced in place in one contiguous gradient buffer, as
// Megatron-Core's DistributedDataParallel does (Megatron-LM at tag
// core_r0.8.0, baf94af3c667, megatron/core/distributed/
// param_and_grad_buffer.py: every bucket is a view of the buffer;
// start_grad_sync issues its reduce-scatter or all-reduce asynchronously under
// --overlap-grad-reduce, and finish_grad_sync, once after the backward, waits
// for them all).
//
// The step code here stages each bucket through one of two slots
// (parallel/dp/grad_buckets.h) and waits for a slot's previous bucket before
// reusing it, so while the DP link is busy the backward stalls — and on a
// pipeline each stage's last backward, and with it the gradient it sends to
// the stage before, which stalls in turn: the stalls add up along the
// pipeline. This pass moves every wait for a DP gradient reduction (a started
// reduce-scatter or all-reduce on "comm dp" or "comm edp") to where the last
// of them is (the reducer's finish, before the gradient norm and the
// optimizer): no bucket waits for another, and the reductions still follow
// one another on the DP stream. The staging copies stay where they are (they
// are this code's cost, which Megatron's in-place buckets do not pay: it errs
// slow by them).
#pragma once
#include <vector>

#include "perf/sim/timeline.h"

namespace gpuledger::perf {

void defer_grad_reduce_waits(std::vector<SimEvent>& program);

}  // namespace gpuledger::perf
