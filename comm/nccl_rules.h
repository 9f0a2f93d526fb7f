// The host-side rules of the NCCL comm, apart from NcclComm so that they are
// unit-tested without a GPU (tests/gpu/test_nccl_rules.cpp): the dtype and
// reduction mappings, and how a call's buffers alias.
//
// Aliasing. The Comm contract (comm.h) and MpiComm accept, besides distinct
// buffers:
//   all_gather(out, in):     in == out + rank·n (this rank's slice, in place);
//   reduce_scatter(out, in): in == out (the input is read from out, n·size
//                            elements, and this rank's slice lands at its start).
// NCCL's in-place forms (NCCL docs, "In-place Operations") are
//   ncclAllGather:     sendbuff == recvbuff + rank·count;
//   ncclReduceScatter: recvbuff == sendbuff + rank·count.
// So the all-gather's in-place form is NCCL's, and the reduce-scatter's is
// NCCL's only on rank 0. Every other overlap (reduce_scatter with in == out on
// rank > 0, an input straddling the output) goes through a scratch buffer of
// the input (all_gather) or of the slice (reduce_scatter), allocated through
// the Device under Account::kWorkspace, so the ledger sees it.
#pragma once
#include <nccl.h>

#include <cstdint>

#include "comm/comm.h"
#include "core/dtype.h"

namespace gpuledger {

// bf16 → ncclBfloat16, fp16 → ncclFloat16, fp32 → ncclFloat32.
ncclDataType_t nccl_dtype(DType t);
// kSum → ncclSum, kMax → ncclMax.
ncclRedOp_t nccl_red_op(ReduceOp op);

enum class NcclAliasing {
  kDistinct,  // the buffers do not overlap: NCCL's out-of-place form
  kInPlace,   // NCCL's in-place form: pass the pointers as they are
  kStaged,    // any other overlap: through a scratch buffer
};

// For all_gather(out, in, n) on `rank` of `size`; n_bytes = n · dtype bytes.
NcclAliasing all_gather_aliasing(const void* out, const void* in, int64_t n_bytes, int64_t rank, int64_t size);
// For reduce_scatter(out, in, n) on `rank` of `size`; n_bytes = n · dtype bytes.
NcclAliasing reduce_scatter_aliasing(const void* out, const void* in, int64_t n_bytes, int64_t rank, int64_t size);

}  // namespace gpuledger
