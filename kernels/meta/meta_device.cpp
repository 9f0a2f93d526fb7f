// MetaDevice's few non-trivial members: the FLOP counting of GEMMs, flash
// attention and cached attention (the same definitions the CPU backend counts
// with), the zeroed host reads, and its description. Every other op is an empty inline body.
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

// The KV ops check their view as the CPU ops do (so a bad engine step fails
// the same way on meta), then write nothing; attention counts its FLOPs.
void MetaDevice::kv_cache_write(const KvCacheView& cache, const void* k, const void* v, DType t,
                                bool calibrate) {
  validate_kv_view(cache, "kv_cache_write");
}

void MetaDevice::cached_attention(void* out, const void* q, DType t, int64_t Hq,
                                  const KvCacheView& cache) {
  validate_kv_view(cache, "cached_attention");
  count_flops(cached_attention_flops(Hq, cache));
}

}  // namespace gpuledger
