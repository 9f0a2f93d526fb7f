// Train progress lines (see train_progress.h).
#include "bench/report/train_progress.h"

#include <fmt/format.h>

#include "analytic/params.h"
#include "bench/report/format.h"
#include "bench/report/plan_tables.h"
#include "bench/report/report.h"

namespace gpuledger::report {

void print_train_header(std::ostream& os, const ResolvedConfig& config, const TrainHeader& h) {
  nlohmann::json head = make_report("train");
  head["config"] = config_json(config);
  head["params"] = {{"total", analytic::model_params(config.model)},
                    {"padded_vocab", analytic::padded_vocab(config.model, config.layout.tp)}};
  print_config_header(os, head);
  os << fmt::format(
      "# backend {} ({}), {}, steps {} (first {} left out of medians), memory limit {}\n", h.backend,
      h.device_description, h.mode, h.steps, h.warmup,
      h.memory_limit_bytes ? format_bytes(static_cast<double>(*h.memory_limit_bytes)) : std::string("none"));
  os << fmt::format("# peak    {} — {}\n", format_optional_si(h.peak_flops, "FLOP/s"), h.peak_source);
  os << fmt::format("# {:>5} {:>10} {:>10} {:>12} {:>7} {:>7} {:>12}\n", "step", "loss", "ms", "tokens/s", "MFU", "HFU",
                    "peak bytes");
}

void print_train_step(std::ostream& os, const TrainStepLine& s) {
  const double tps = s.seconds > 0 ? s.tokens_per_step / s.seconds : 0;
  std::string mfu = "-", hfu = "-";
  if (s.peak_total_flops && s.seconds > 0) {
    mfu = format_percent(s.model_flops / s.seconds / *s.peak_total_flops);
    hfu = format_percent(s.hardware_flops / s.seconds / *s.peak_total_flops);
  }
  os << fmt::format("  {:>5} {:>10.5f} {:>10.2f} {:>12.1f} {:>7} {:>7} {:>12}\n", s.step, s.loss, s.seconds * 1e3, tps,
                    mfu, hfu, format_bytes(static_cast<double>(s.peak_bytes)))
     << std::flush;
}

}  // namespace gpuledger::report
