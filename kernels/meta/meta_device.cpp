// MetaDevice's few non-trivial members: the zeroed host reads, the memory
// operations' reports to the step program and its description. Every op is an
// empty inline body (Device checks, counts and reports).
#include "kernels/meta/meta_device.h"

#include <cstring>

#include "kernels/op_bytes.h"

namespace gpuledger {

std::string MetaDevice::description() const {
  return "meta (bookkeeping only: bytes booked, FLOPs counted, no memory touched)";
}

void MetaDevice::copy_to_host(void* host_dst, const void* src, int64_t bytes) {
  // There is no data to read; zeros make every caller deterministic.
  if (bytes > 0) std::memset(host_dst, 0, static_cast<size_t>(bytes));
  if (auto* sink = program_sink()) sink->on_op(host_copy_op("copy_to_host", bytes));
}

void MetaDevice::copy_from_host(void*, const void*, int64_t bytes) {
  if (auto* sink = program_sink()) sink->on_op(host_copy_op("copy_from_host", bytes));
}

void MetaDevice::copy(void*, const void*, int64_t bytes) {
  if (auto* sink = program_sink()) sink->on_op(memory_bound_op("copy", OpClass::kCopy, device_copy_bytes(bytes)));
}

void MetaDevice::fill_zero(void*, int64_t bytes) {
  if (auto* sink = program_sink()) sink->on_op(memory_bound_op("fill_zero", OpClass::kCopy, bytes));
}

}  // namespace gpuledger
