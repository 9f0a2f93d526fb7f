// The few lines a plan leads with: whether every rank class fits, the tightest
// rank, its model states and activations, and the step-time bound — the
// answer before the detail (bench/report/plan_tables.h prints both).
#pragma once
#include <ostream>

#include <nlohmann/json.hpp>

namespace gpuledger::report {

// The index in doc["ranks"] of the tightest rank class: the least headroom on
// the device when a device was given, else the largest device total; -1 when
// the report has no ranks.
int tightest_rank_index(const nlohmann::json& doc);

// A rank's model states: weights, gradients, master weights and optimizer
// state, and with --offload optimizer what the host holds of them.
double model_states_bytes(const nlohmann::json& rank);

void print_plan_summary(std::ostream& os, const nlohmann::json& doc);

}  // namespace gpuledger::report
