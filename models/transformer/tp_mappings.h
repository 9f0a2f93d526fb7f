// The tensor-parallel communication of the transformer's blocks, once, named
// as Megatron-LM's tensor_parallel/mappings.py names it (Shoeybi et al. 2019
// §3: f and g; Korthikanti et al. 2022 §4.2.2: the sequence-parallel forms):
//   reduce_from_tensor_model_parallel_region    all-reduce over tp;
//   reduce_scatter_to_sequence_parallel_region  reduce-scatter over tp to the
//                                               rank's token shard;
//   gather_from_sequence_parallel_region        all-gather of every rank's
//                                               token shard (a workspace).
// The two forms every block uses pick between them by sequence parallelism:
//   AllTokens    the hidden states of every token for a GEMM that reads them
//                all (a column-parallel input, the head, the embedding's
//                transpose): the rank's own tensor, or under sp its shard
//                gathered;
//   PartialSums  the output of a row-parallel (or vocabulary-parallel) GEMM:
//                each rank's partial sums of every token, summed over tp into
//                the rank's tokens — written into the output and all-reduced
//                there, or under sp written into a workspace of every token
//                and reduce-scattered into the output (the rank's shard).
// The backward uses the same two: the transpose of a gather is a
// reduce-scatter, and of a reduce-scatter a gather.
#pragma once
#include <cstdint>

#include "comm/comm.h"
#include "core/dtype.h"
#include "kernels/device.h"

namespace gpuledger {

// The tokens of one TP rank between blocks: all b·s of them, or under sp the
// rank's shard of b·s/t, each `hidden` elements of e.
struct TpRegion {
  Device& dev;
  Comm& tp;
  bool sp = false;
  int64_t tokens = 0;  // b·s
  int64_t hidden = 0;
  DType e = DType::kFP32;
  int64_t tokens_local() const { return sp ? tokens / tp.size() : tokens; }
};

void reduce_from_tensor_model_parallel_region(Comm& tp, void* x, int64_t elems, DType t);
void reduce_scatter_to_sequence_parallel_region(Comm& tp, void* shard, const void* full, int64_t shard_elems, DType t);
// A workspace buffer `name` of tp.size()·shard_elems elements of t, holding every rank's shard.
Buffer gather_from_sequence_parallel_region(Device& dev, Comm& tp, const void* shard, int64_t shard_elems, DType t,
                                            const char* name);

class AllTokens {
 public:
  // x: the rank's tokens (tokens_local × hidden).
  AllTokens(const TpRegion& r, const void* x, const char* name);
  const void* data() const { return data_; }  // tokens × hidden
  void reset() { gathered_.reset(); }         // frees the gathered copy (data() then dangles under sp)

 private:
  Buffer gathered_;
  const void* data_;
};

class PartialSums {
 public:
  // out: the rank's tokens (tokens_local × hidden). Under sp allocates the
  // workspace `name` (tokens × hidden).
  PartialSums(const TpRegion& r, void* out, const char* name);
  void* data() const { return data_; }  // where the GEMM writes: tokens × hidden
  void reduce();                        // sums over tp into out; frees the workspace

 private:
  TpRegion r_;
  void* out_;
  Buffer partial_;
  void* data_;
};

}  // namespace gpuledger
