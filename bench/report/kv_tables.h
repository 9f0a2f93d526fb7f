// Human tables for kv reports, rendered from the report document: the cache
// per rank and, with a device, the capacity and the decode roofline.
#pragma once
#include <ostream>

#include <nlohmann/json.hpp>

namespace gpuledger::report {

void print_kv(std::ostream& os, const nlohmann::json& doc);

}  // namespace gpuledger::report
