// Communication per rank per step, by collective and group, for this design,
// and the bus-bandwidth factors of nccl-tests (doc/PERFORMANCE.md): all-reduce
// 2(n−1)/n, all-gather and reduce-scatter (n−1)/n, broadcast/send/recv 1.
// Bytes are counted as nccl-tests sizes a call: all-reduce the buffer,
// reduce-scatter its input, all-gather its output, send/recv the message.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "models/config.h"
#include "models/run_config.h"
#include "parallel/layout.h"

namespace gpuledger::analytic {

struct CommCount {
  int64_t calls = 0;
  int64_t bytes = 0;
};

// Key: "<kind>@<group>", kind in all_reduce reduce_scatter all_gather broadcast
// send recv; group in dp tp pp emb (the tied-embedding group). Only non-zero entries.
//   DP, ZeRO 0/1: all-reduce of every gradient bucket (g bytes per element);
//     ZeRO 1 then all-gathers the updated weights (e per element, per unit).
//   ZeRO 2: reduce-scatter of each unit's gradient, all-gather of weights after the step.
//   ZeRO 3: all-gather of each unit before forward and before backward, reduce-scatter
//     of its gradient (1.5× the DP volume).
//   TP: per layer per microbatch 2 all-reduces of b·s·h·e forward and 2 backward
//     (SP: all-gather + reduce-scatter of the same size instead), plus the
//     vocab-parallel cross-entropy's reductions of b·s fp32 values.
//   PP: one activation send and one gradient recv of b·s_l·h·e per microbatch per
//     downstream boundary (and the mirror upstream).
std::map<std::string, CommCount> rank_comm_per_step(const ModelConfig& m, const Layout& l,
                                                    const RunConfig& r, int64_t rank);

// nccl-tests bus-bandwidth factor of a kind on a group of n ranks.
double busbw_factor(std::string_view kind, int64_t n);

}  // namespace gpuledger::analytic
