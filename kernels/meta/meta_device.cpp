// MetaDevice's few non-trivial members: the zeroed host reads, the memory
// operations' reports to the step program and its description. Every op is an
// empty inline body (Device checks, counts and reports).
#include "kernels/meta/meta_device.h"

#include <cstring>

#include "kernels/op_bytes.h"

namespace gpuledger {
namespace {

OpCost memory_operation(std::string_view name, OpCostKind kind, int64_t bytes) {
  OpCost o;
  o.name = name;
  o.kind = kind;
  o.op_class = OpClass::kCopy;
  o.bytes = bytes;
  return o;
}

}  // namespace

std::string MetaDevice::description() const {
  return "meta (bookkeeping only: bytes booked, FLOPs counted, no memory touched)";
}

void MetaDevice::copy_to_host(void* host_dst, const void* src, int64_t bytes) {
  // There is no data to read; zeros make every caller deterministic.
  if (bytes > 0) std::memset(host_dst, 0, static_cast<size_t>(bytes));
  if (auto* sink = program_sink()) sink->on_op(memory_operation("copy_to_host", OpCostKind::kHostCopy, bytes));
}

void MetaDevice::copy_from_host(void*, const void*, int64_t bytes) {
  if (auto* sink = program_sink()) sink->on_op(memory_operation("copy_from_host", OpCostKind::kHostCopy, bytes));
}

void MetaDevice::copy(void*, const void*, int64_t bytes) {
  if (auto* sink = program_sink())
    sink->on_op(memory_operation("copy", OpCostKind::kMemoryBound, device_copy_bytes(bytes)));
}

void MetaDevice::fill_zero(void*, int64_t bytes) {
  if (auto* sink = program_sink()) sink->on_op(memory_operation("fill_zero", OpCostKind::kMemoryBound, bytes));
}

}  // namespace gpuledger
