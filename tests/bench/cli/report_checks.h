// What every train report of a meta or cpu run must hold, rank by rank: each
// check ok, each account but workspace equal to its exact budget, the
// executed FLOPs equal to the analytic hardware count, and every collective's
// calls and bytes equal to the analytic comm table.
#pragma once
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace gpuledger::testing {

inline void expect_every_check_passes(const nlohmann::json& doc) {
  ASSERT_GE(doc["checks"].size(), 9u);
  for (const auto& c : doc["checks"]) EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
  for (const auto& rank : doc["ranks"]) {
    for (auto a : {"weights", "grads", "master", "optim", "activations", "comm"})
      EXPECT_EQ(rank["measured"]["peak_by_account"][a], rank["analytic"]["exact"][a]) << a;
    EXPECT_EQ(rank["flops"]["executed_per_step"], rank["flops"]["analytic_hardware"]);
    for (const auto& [key, v] : rank["analytic"]["comm"].items()) {
      EXPECT_EQ(rank["comm"][key]["calls"], v["calls"]) << key;
      EXPECT_EQ(rank["comm"][key]["bytes"], v["bytes"]) << key;
    }
  }
}

}  // namespace gpuledger::testing
