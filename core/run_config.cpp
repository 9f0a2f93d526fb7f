// Name <-> enum conversions for the run options of core/run_config.h (the
// spellings used on the command line and in reports).
#include "core/run_config.h"

namespace gpuledger {

std::string_view schedule_name(Schedule s) {
  switch (s) {
    case Schedule::k1F1B: return "1f1b";
    case Schedule::kGPipe: return "gpipe";
  }
  return "?";
}

std::string_view recompute_name(Recompute r) {
  switch (r) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
  }
  return "?";
}

std::string_view attention_name(AttentionKind a) {
  switch (a) {
    case AttentionKind::kMaterialized: return "materialized";
    case AttentionKind::kFlash: return "flash";
  }
  return "?";
}

std::string_view optimizer_name(OptimizerKind o) {
  switch (o) {
    case OptimizerKind::kAdamW: return "adamw";
    case OptimizerKind::kSGD: return "sgd";
    case OptimizerKind::kAdagrad: return "adagrad";
    case OptimizerKind::kLion: return "lion";
  }
  return "?";
}

std::optional<Schedule> schedule_from_name(std::string_view n) {
  for (Schedule s : {Schedule::k1F1B, Schedule::kGPipe})
    if (schedule_name(s) == n) return s;
  return std::nullopt;
}

std::optional<Recompute> recompute_from_name(std::string_view n) {
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull})
    if (recompute_name(r) == n) return r;
  return std::nullopt;
}

std::optional<AttentionKind> attention_from_name(std::string_view n) {
  for (AttentionKind a : {AttentionKind::kMaterialized, AttentionKind::kFlash})
    if (attention_name(a) == n) return a;
  return std::nullopt;
}

std::optional<OptimizerKind> optimizer_from_name(std::string_view n) {
  for (OptimizerKind o : {OptimizerKind::kAdamW, OptimizerKind::kSGD, OptimizerKind::kAdagrad, OptimizerKind::kLion})
    if (optimizer_name(o) == n) return o;
  return std::nullopt;
}

}  // namespace gpuledger
