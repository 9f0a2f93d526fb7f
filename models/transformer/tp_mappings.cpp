// Tensor-parallel mappings (see tp_mappings.h).
#include "models/transformer/tp_mappings.h"

namespace gpuledger {

void reduce_from_tensor_model_parallel_region(Comm& tp, void* x, int64_t elems, DType t) { tp.all_reduce(x, elems, t); }

void reduce_scatter_to_sequence_parallel_region(Comm& tp, void* shard, const void* full, int64_t shard_elems, DType t) {
  tp.reduce_scatter(shard, full, shard_elems, t);
}

Buffer gather_from_sequence_parallel_region(Device& dev, Comm& tp, const void* shard, int64_t shard_elems, DType t,
                                            const char* name) {
  Buffer full = dev.alloc(dtype_bytes(t) * shard_elems * tp.size(), Account::kWorkspace, name);
  tp.all_gather(full.data(), shard, shard_elems, t);
  return full;
}

AllTokens::AllTokens(const TpRegion& r, const void* x, const char* name) : data_(x) {
  if (!r.sp) return;
  gathered_ = gather_from_sequence_parallel_region(r.dev, r.tp, x, r.tokens_local() * r.hidden, r.e, name);
  data_ = gathered_.data();
}

PartialSums::PartialSums(const TpRegion& r, void* out, const char* name) : r_(r), out_(out), data_(out) {
  if (!r.sp) return;
  partial_ = r.dev.alloc(dtype_bytes(r.e) * r.tokens * r.hidden, Account::kWorkspace, name);
  data_ = partial_.data();
}

void PartialSums::reduce() {
  if (r_.sp) {
    reduce_scatter_to_sequence_parallel_region(r_.tp, out_, partial_.data(), r_.tokens_local() * r_.hidden, r_.e);
    partial_.reset();
  } else {
    reduce_from_tensor_model_parallel_region(r_.tp, out_, r_.tokens * r_.hidden, r_.e);
  }
}

}  // namespace gpuledger
