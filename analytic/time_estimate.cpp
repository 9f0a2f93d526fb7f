// Time estimates from peaks: the training time of a token budget at an
// assumed MFU (6 FLOPs per parameter per token), and a step-time lower bound
// (the hardware FLOPs at peak, nothing else). docs/formulas/flops.md.
#include "analytic/time_estimate.h"

#include <stdexcept>
#include <string>

namespace gpuledger::analytic {

double training_seconds(double params, double tokens, int64_t gpus, double peak_flops, double mfu) {
  // Narayanan et al. 2021 §5.1 estimate time ≈ 8·T·P / (n·X) with recompute
  // (X the achieved FLOP/s per GPU); without recompute the FLOPs are 6·T·P
  // (Kaplan et al. 2020 §2.1), and X = peak × MFU, so
  //   seconds = 6·P·T / (n · peak · MFU).
  if (gpus < 1) throw std::invalid_argument("training_seconds: gpus must be >= 1, got " + std::to_string(gpus));
  if (!(peak_flops > 0)) throw std::invalid_argument("training_seconds: peak FLOP/s must be > 0");
  if (!(mfu > 0 && mfu <= 1)) throw std::invalid_argument("training_seconds: MFU must be in (0, 1]");
  return 6.0 * params * tokens / (static_cast<double>(gpus) * peak_flops * mfu);
}

std::optional<double> step_time_lower_bound_s(int64_t hardware_flops, std::optional<double> peak_flops) {
  // No rank can execute its FLOPs faster than its peak; comm, bubbles and
  // non-GEMM work only add. An unknown peak gives an unknown bound.
  if (!peak_flops || !(*peak_flops > 0)) return std::nullopt;
  return static_cast<double>(hardware_flops) / *peak_flops;
}

}  // namespace gpuledger::analytic
