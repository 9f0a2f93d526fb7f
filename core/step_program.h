// What one rank's training step issues, in order, described for pricing: every
// Device op with the figures its time depends on (OpCost), and every
// communication call with its group instance (CommCall). The Device's op
// entry points (kernels/device_ops.cpp) and the simulated communicator
// (comm/sim_comm.h) report them to a StepProgramSink when one is attached;
// perf/sim/program_recorder.h prices them with a device and a network profile
// into the program the step simulator (perf/sim/timeline.h) lays on clocks.
// The types live here, below kernels/, comm/ and perf/, so that the side that
// reports and the side that prices share them without depending on each other.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/collective.h"
#include "core/dtype.h"

namespace gpuledger {

// The class of a bandwidth-bound op: which achieved bandwidth prices it (a
// device profile keeps one per class; perf/device_profile.h names them).
//   kNorm        LayerNorm, RMSNorm (forward and backward)
//   kActivation  GELU, SwiGLU, dropout, RoPE, add, scale, bias
//   kSoftmax     the materialized attention's softmax, cross-entropy and the
//                vocabulary-parallel cross-entropy's passes
//   kOptimizer   the optimizer update, the gradient norm's Σx²
//   kCopy        conversions, layout copies (split/merge of heads and QKV),
//                embeddings, device-to-device copies and fills, the KV cache's writes
enum class OpClass { kNorm, kActivation, kSoftmax, kOptimizer, kCopy };

// How an op's time is priced (perf/op_time.h op_seconds).
enum class OpCostKind {
  kGemm,            // m, n, k, batch in dtype: the GEMM table or the roofline
  kFlashAttention,  // flops and bytes at the attention shape (seq, heads, head_dim)
  kMemoryBound,     // bytes at the op class's bandwidth
  kHostCopy,        // bytes across the host link, one direction
};

struct OpCost {
  std::string_view name;  // the op table's name: "gemm", "rmsnorm_forward", … (static storage)
  OpCostKind kind = OpCostKind::kMemoryBound;
  OpClass op_class = OpClass::kCopy;         // kMemoryBound only
  DType dtype = DType::kFP32;                // the compute dtype of a GEMM or attention
  int64_t flops = 0;                         // kernels/flop_counts.h's count (0 for element-wise ops)
  int64_t bytes = 0;                         // the least traffic (kernels/op_bytes.h)
  int64_t m = 0, n = 0, k = 0, batch = 0;    // kGemm
  bool trans_a = false, trans_b = false;     // kGemm: C = op(A) · op(B)
  DType c_dtype = DType::kFP32;              // kGemm: C's dtype
  bool accumulate = false;                   // kGemm: C read and added to (beta ≠ 0)
  bool fp8 = false;                          // kGemm: FP8 operands (GemmArgs::fp8)
  int64_t seq = 0, heads = 0, head_dim = 0;  // kFlashAttention (query length, query heads, head dim)
};

// The cost of a bandwidth-bound op of class `c` moving `bytes`, and of a host
// copy of `bytes` (one direction): the two forms the op table's element-wise
// entries and a backend's memory operations report.
inline OpCost memory_bound_op(std::string_view name, OpClass c, int64_t bytes) {
  OpCost o;
  o.name = name;
  o.kind = OpCostKind::kMemoryBound;
  o.op_class = c;
  o.bytes = bytes;
  return o;
}
inline OpCost host_copy_op(std::string_view name, int64_t bytes) {
  OpCost o = memory_bound_op(name, OpClass::kCopy, bytes);
  o.kind = OpCostKind::kHostCopy;
  return o;
}

// A communication call as the rank issues it.
//   kBlocking  a collective (or send/recv) the caller waits for;
//   kStart     a collective started beside the compute (Comm::*_start), `handle` names it;
//   kWait      the caller waits for the started collective `handle`.
enum class CommMode { kBlocking, kStart, kWait };

struct CommCall {
  CommMode mode = CommMode::kBlocking;
  CommKind kind = CommKind::kAllReduce;
  std::string_view group;  // "tp", "dp", "pp", … (the Comm's group name)
  int64_t bytes = 0;       // as the counters book the call (comm/comm_bytes.h)
  // The group's world ranks, in group order; this rank and, for send and
  // recv, the peer, as world ranks. Together they name the group instance.
  const std::vector<int64_t>* members = nullptr;
  int64_t world_rank = 0;
  int64_t peer_world_rank = -1;  // send, recv: the other side; else -1
  int64_t handle = -1;           // kStart, kWait
};

class StepProgramSink {
 public:
  virtual ~StepProgramSink() = default;
  virtual void on_op(const OpCost& op) = 0;
  virtual void on_comm(const CommCall& call) = 0;
};

}  // namespace gpuledger
