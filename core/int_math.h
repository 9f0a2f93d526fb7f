// Integer helpers shared by the budgets, the layouts and the kernels.
#pragma once
#include <cstdint>

namespace gpuledger {

// ⌈a / b⌉ for a >= 0, b > 0.
constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace gpuledger
