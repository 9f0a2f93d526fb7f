// Default bodies of the vocabulary-parallel ops of Device (device.h, the end
// of the op table): they were added after the first backends, so a backend
// that has not implemented them yet fails loudly instead of failing to build.
#include <stdexcept>
#include <string>

#include "kernels/device.h"

namespace gpuledger {

namespace {
[[noreturn]] void missing(const Device& d, const char* op) {
  throw std::logic_error(std::string(op) + ": not implemented on the " + d.name() + " backend");
}
}  // namespace

void Device::vocab_embedding_forward(void*, const int32_t*, const void*, DType, int64_t, int64_t,
                                     int64_t, int64_t) {
  missing(*this, "vocab_embedding_forward");
}
void Device::vocab_embedding_backward(void*, DType, const void*, DType, const int32_t*, int64_t,
                                      int64_t, int64_t, int64_t) {
  missing(*this, "vocab_embedding_backward");
}
void Device::vocab_ce_stats(float*, float*, const float*, const int32_t*, int64_t, int64_t, int64_t,
                            int64_t) {
  missing(*this, "vocab_ce_stats");
}
void Device::vocab_ce_exp(float*, float*, const float*, int64_t, int64_t, int64_t, int64_t) {
  missing(*this, "vocab_ce_exp");
}
void Device::vocab_ce_normalize(float*, const float*, int64_t, int64_t) {
  missing(*this, "vocab_ce_normalize");
}
void Device::vocab_ce_backward(float*, const float*, const int32_t*, int64_t, int64_t, int64_t,
                               float) {
  missing(*this, "vocab_ce_backward");
}

}  // namespace gpuledger
