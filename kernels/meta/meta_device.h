// MetaDevice: the bookkeeping-only backend (docs/architecture.md "Three backends"). It
// books every allocation in the ledger exactly as the real backends do, touches
// no memory (Buffer::data() is nullptr) and computes nothing: every op body is
// empty. Device's entry points still check each call and count its FLOPs
// (kernels/flop_counts.h), so a meta run fails and counts as a real one does.
// It allocates no workspace of its own: the workspace account is
// backend-specific, every other account matches cpu to the byte.
#pragma once
#include <string>

#include "kernels/device.h"

namespace gpuledger {

class MetaDevice : public Device {
 public:
  explicit MetaDevice(Ledger& ledger) : Device(ledger) {}
  std::string name() const override { return "meta"; }
  std::string description() const override;
  bool touches_memory() const override { return false; }

  // copy_to_host zeroes the host buffer, so callers read deterministic values.
  // The memory operations report their cost to the step program's sink, as
  // the op table's entry points do for the ops (device.h).
  void copy_to_host(void* host_dst, const void* src, int64_t bytes) override;
  void copy_from_host(void* dst, const void* host_src, int64_t bytes) override;
  void copy(void* dst, const void* src, int64_t bytes) override;
  void fill_zero(void* dst, int64_t bytes) override;

 protected:
  // Every op of the table, each doing nothing (generated: scripts/gen_profiling_device.py).
#include "kernels/meta/meta_op_overrides.inc"
  // FP8 emulation (--dtype fp8): not a table op every backend runs (the default throws).
  void fp8_quantize_dequantize_impl(float* dst, const void* src, DType t, int64_t n, Fp8Format f) override {}
  void fp8_quantize_dequantize_blocks_impl(float* dst, const void* src, DType t, int64_t rows, int64_t cols,
                                           int64_t block_rows, int64_t block_cols, Fp8Format f) override {}

  // Never called: Device::alloc skips raw_alloc when touches_memory() is false.
  void* raw_alloc(int64_t bytes) override { return nullptr; }
  void raw_free(void* p, int64_t bytes) override {}
};

}  // namespace gpuledger
