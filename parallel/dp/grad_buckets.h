// Data-parallel gradient reduction in buckets (ZeRO 0 and 1; Megatron's
// DistributedDataParallel grad buffer, PyTorch DDP's bucket_cap_mb): the
// rank's units are laid back to back and cut into buckets of
// ⌊bucket_mb·2²⁰ / g⌋ elements; each bucket is one all-reduce over dp
// (docs/formulas/comm.md: ⌈P_r / bucket⌉ calls, P_r·g bytes). A bucket may
// span units: its pieces are copied into one contiguous staging buffer
// (docs/exact-budget.md "Communication staging": 4·min(bucket, P_r) bytes,
// account comm), reduced there in the gradient dtype and copied back, so a
// bucket is one call booked at g bytes per element. The buffer is sized for
// fp32 so that a backend may reduce a 16-bit bucket in fp32 in place; MpiComm
// converts into its own fp32 vectors instead (parallel/comm/mpi_comm.h).
//
// No averaging: the backward already seeds d(token loss) = 1/(tokens of the
// global batch), so the sum over the dp replicas is the global mean's gradient.
// No overlap with backward: the reduction runs after the last microbatch.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/device.h"
#include "parallel/comm/comm.h"

namespace gpuledger {

// Elements per bucket: ⌊bucket_mb·2²⁰ / grad_bytes⌋ (throws if < 1).
int64_t bucket_elems(double bucket_mb, int64_t grad_bytes);

// All-reduces (sum) the gradient buffers `grads[u]` (elems[u] elements of
// type g) over `dp`, bucket by bucket, through `staging` (at least
// 4·min(bucket, Σ elems) bytes). On meta (null pointers) only the calls run.
void all_reduce_gradients(Device& dev, Comm& dp, const std::vector<void*>& grads,
                          const std::vector<int64_t>& elems, DType g, int64_t bucket,
                          void* staging);

}  // namespace gpuledger
