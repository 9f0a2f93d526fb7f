// `serve-plan` as a typed run: a request (the model and its dtype, the request
// rate and lengths or a trace, the targets, the devices and how they are
// assumed to run) → run_serve_plan → per device the serving plan of
// analytic/serving_plan.h and the memory terms it was given. docs/serving-plan.md.
// The request and record types: bench/record/serve_plan_record.h.
#pragma once
#include "bench/record/serve_plan_record.h"

namespace gpuledger::run {

// Throws ConfigError for bad input (a rate, length, fraction or percentile out
// of range; a device without memory or bandwidth).
ServePlanRecord run_serve_plan(const ServePlanRequest& request);

}  // namespace gpuledger::run
