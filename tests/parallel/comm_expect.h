// Test helper (not a test binary): a rank's booked collectives against the
// analytic communication (analytic/comm_volume.h), key by key.
#pragma once
#include <gtest/gtest.h>

#include <string>

namespace gpuledger::testing {

// Every "<kind>@<group>" of `want` is in `got` with the same calls and bytes,
// and `got` holds nothing else. Both are maps from that key to a record with
// `calls` and `bytes` (CommCounters::by_key(), analytic::rank_comm_per_step).
template <class Got, class Want>
void expect_comm_equals(const Got& got, const Want& want) {
  for (const auto& [key, c] : want) {
    auto it = got.find(key);
    if (it == got.end()) {
      ADD_FAILURE() << "missing " << key;
      continue;
    }
    EXPECT_EQ(it->second.calls, c.calls) << key;
    EXPECT_EQ(it->second.bytes, c.bytes) << key;
  }
  for (const auto& [key, c] : got)
    if (!want.count(key)) ADD_FAILURE() << "unexpected " << key << " (" << c.calls << " calls)";
}

}  // namespace gpuledger::testing
