// Trace slices as JSON: the compact form round-trips, and the Chrome trace
// has a process per rank, "compute" as thread 0 and the comm streams after it
// in name order, timestamps from the run's first slice (bench/report/trace_json.h).
#include "bench/report/trace_json.h"

#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <utility>
#include <vector>

namespace gpuledger::report {
namespace {

TEST(TraceJson, SlicesRoundTrip) {
  const std::vector<TraceSlice> s = {{"compute", "gemm", 1000.5, 20.25, 4096, 0},
                                     {"comm pp", "send", 1030.0, 5.0, 0, 32768}};
  EXPECT_EQ(trace_slices_from_json(trace_slices_json(s)), s);
  EXPECT_THROW(trace_slices_from_json(nlohmann::json::object()), std::invalid_argument);
  EXPECT_THROW(trace_slices_from_json(nlohmann::json::parse("[[\"compute\", \"gemm\"]]")), std::invalid_argument);
}

TEST(TraceJson, ChromeTraceHasAProcessPerRankAndAThreadPerStream) {
  const std::vector<TraceSlice> r0 = {{"compute", "gemm", 1000.0, 10.0, 64, 0},
                                      {"comm tp", "all_reduce", 1012.0, 3.0, 0, 128},
                                      {"comm dp", "all_reduce", 1020.0, 4.0, 0, 256}};
  const std::vector<TraceSlice> r1 = {{"compute", "add", 1001.0, 2.0, 0, 0}};
  const auto doc = chrome_trace_json({{0, "r0", &r0, 0}, {1, "r1", &r1, 3}}, "test");
  EXPECT_EQ(doc["otherData"]["slices_dropped"], 3);
  std::map<std::pair<int64_t, int64_t>, std::string> threads;
  std::vector<nlohmann::json> slices;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") threads[{e["pid"], e["tid"]}] = e["args"]["name"];
    if (e["ph"] == "X") slices.push_back(e);
  }
  // "compute" first, then the comm streams in name order: dp before tp.
  EXPECT_EQ(threads.at({0, 0}), "compute");
  EXPECT_EQ(threads.at({0, 1}), "comm dp");
  EXPECT_EQ(threads.at({0, 2}), "comm tp");
  EXPECT_EQ(threads.at({1, 0}), "compute");
  ASSERT_EQ(slices.size(), 4u);
  EXPECT_EQ(slices[0]["ts"], 0.0);  // the first slice of the run
  EXPECT_EQ(slices[0]["dur"], 10.0);
  EXPECT_EQ(slices[0]["args"]["flops"], 64);
  EXPECT_EQ(slices[1]["tid"], 2);  // comm tp
  EXPECT_EQ(slices[1]["ts"], 12.0);
  EXPECT_EQ(slices[1]["args"]["bytes"], 128);
  EXPECT_EQ(slices[3]["pid"], 1);
  EXPECT_EQ(slices[3]["ts"], 1.0);
}

}  // namespace
}  // namespace gpuledger::report
