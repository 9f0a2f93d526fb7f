// The predicted step as a table (`train`, `plan`): the step, tokens/s, MFU and
// HFU on the profiles, then each simulated rank's breakdown — compute, the
// communication each group left exposed, the bubble (waiting for the other
// stages) and the tail — printed from the typed prediction.
#pragma once
#include <ostream>

#include "bench/record/step_prediction.h"

namespace gpuledger::report {

void print_prediction(std::ostream& os, const run::StepPrediction& p);

}  // namespace gpuledger::report
