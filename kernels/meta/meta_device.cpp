// MetaDevice's few non-trivial members: the FLOP counting of GEMMs and flash
// attention (the same definitions the CPU backend counts with), the zeroed
// host reads, and its description. Every other op is an empty inline body.
#include "kernels/meta/meta_device.h"

#include <cstring>

#include "kernels/flop_counts.h"

namespace gpuledger {

std::string MetaDevice::description() const {
  return "meta (bookkeeping only: bytes booked, FLOPs counted, no memory touched)";
}

void MetaDevice::copy_to_host(void* host_dst, const void* src, int64_t bytes) {
  // There is no data to read; zeros make every caller deterministic.
  if (bytes > 0) std::memset(host_dst, 0, static_cast<size_t>(bytes));
}

void MetaDevice::gemm(const GemmArgs& g) { count_flops(gemm_flops(g)); }

void MetaDevice::flash_attention_forward(void* out, float* lse, const void* q, const void* k,
                                         const void* v, DType t, const AttnShape& s, float p,
                                         RngKey key) {
  count_flops(flash_forward_flops(s));
}

void MetaDevice::flash_attention_backward(void* dq, void* dk, void* dv, const void* dout,
                                          const void* q, const void* k, const void* v,
                                          const void* out, const float* lse, DType t,
                                          const AttnShape& s, float p, RngKey key) {
  count_flops(flash_backward_flops(s));
}

}  // namespace gpuledger
