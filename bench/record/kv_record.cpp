// The prefill chunk a `kv` request runs with (see kv_record.h).
#include "bench/record/kv_record.h"

namespace gpuledger::run {

int64_t effective_prefill_chunk(const KvRequest& q) {
  if (q.prefill_chunk > 0) return q.prefill_chunk;
  const auto& d = q.config.device;
  if (d && q.config.device_memory_bytes)
    return analytic::vllm_default_max_num_batched_tokens(*q.config.device_memory_bytes, d->name, /*api_server=*/true);
  return 2048;
}

}  // namespace gpuledger::run
