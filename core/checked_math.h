// Checked 64-bit integer arithmetic for every byte, element, FLOP-count, rank
// and token figure computed from user input: a sum or product that does not
// fit in int64_t throws OverflowError naming the quantity, so an overflow is
// never a printed figure. The command line maps OverflowError to exit status 2
// (the configuration asks for more than can be represented).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>

namespace gpuledger {

class OverflowError : public std::overflow_error {
 public:
  explicit OverflowError(std::string_view quantity)
      : std::overflow_error(std::string(quantity) +
                            " does not fit in a 64-bit integer (the configuration is too large)"),
        quantity_(quantity) {}
  const std::string& quantity() const { return quantity_; }

 private:
  std::string quantity_;
};

// a + b; throws OverflowError(quantity) when it does not fit.
inline int64_t checked_add(int64_t a, int64_t b, std::string_view quantity) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) throw OverflowError(quantity);
  return out;
}

// a · b; throws OverflowError(quantity) when it does not fit.
inline int64_t checked_mul(int64_t a, int64_t b, std::string_view quantity) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) throw OverflowError(quantity);
  return out;
}

// The product of every factor, checked at each step.
inline int64_t checked_product(std::initializer_list<int64_t> factors, std::string_view quantity) {
  int64_t out = 1;
  for (const int64_t f : factors) out = checked_mul(out, f, quantity);
  return out;
}

// The sum of `values` (any range of integers), checked at each step.
template <typename Range>
int64_t checked_sum(const Range& values, std::string_view quantity) {
  int64_t out = 0;
  for (const auto v : values) out = checked_add(out, static_cast<int64_t>(v), quantity);
  return out;
}

}  // namespace gpuledger
