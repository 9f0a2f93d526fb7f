// The predicted step (bench/record/step_prediction.h) as the report writes it:
// the "prediction" section (profiles, step, MFU, each simulated rank's
// breakdown) and the summary's "predicted" figures. Written only; a report
// reader takes the figures it needs by their JSON paths.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "bench/record/step_prediction.h"

namespace gpuledger::report {

nlohmann::json prediction_json(const run::StepPrediction& p);
// A simulated stream's group: "comm tp" → "tp" (the report's and the table's column name).
std::string stream_group(const std::string& stream);
// {step_ms, tokens_per_s, mfu, hfu}: what a sweep and a reader of the summary compare.
nlohmann::json predicted_summary_json(const run::StepPrediction& p);

}  // namespace gpuledger::report
