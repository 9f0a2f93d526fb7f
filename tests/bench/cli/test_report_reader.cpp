// JsonView, the checked accessor every report read goes through: each wrong
// shape is a ReportFormatError whose message names the file and JSON path.
#include <gtest/gtest.h>

#include <functional>

#include "bench/report/report_reader.h"

namespace {

using gpuledger::report::JsonView;
using gpuledger::report::ReportFormatError;
using nlohmann::json;

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ReportFormatError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(JsonView, ReadsWhatIsThereAndNamesThePathOfWhatIsNot) {
  const json doc = json::parse(R"({"ranks": [{"rank": 3, "measured": {"peak_bytes": 1024, "name": "x"}}],
                                    "big": 18446744073709551615, "half": 2.5, "nil": null})");
  const JsonView root(doc, "r.json");
  const JsonView rank = root.at("ranks").at(0);
  EXPECT_EQ(rank.at("rank").integer(), 3);
  EXPECT_EQ(rank.at("measured").at("peak_bytes").number(), 1024.0);
  EXPECT_EQ(rank.at("measured").at("name").string(), "x");
  EXPECT_EQ(root.at("ranks").size(), 1u);
  EXPECT_FALSE(root.has("nil"));
  EXPECT_FALSE(root.find("absent").has_value());
  EXPECT_EQ(root.number_or("absent", 7.0), 7.0);
  EXPECT_EQ(root.number_or("nil", 7.0), 7.0);

  EXPECT_EQ(message_of([&] { rank.at("measured").at("peak"); }), "r.json: ranks[0].measured.peak: missing");
  EXPECT_EQ(message_of([&] { rank.at("measured").at("name").number(); }),
            "r.json: ranks[0].measured.name: expected a number, found a string");
  EXPECT_EQ(message_of([&] { root.at("ranks").at(1); }), "r.json: ranks: has 1 elements; element 1 is missing");
  EXPECT_EQ(message_of([&] { rank.at("rank").at("x"); }), "r.json: ranks[0].rank: expected an object, found a number");
  EXPECT_EQ(message_of([&] { root.at("big").integer(); }), "r.json: big: too large for a 64-bit integer");
  EXPECT_EQ(message_of([&] { root.at("half").integer(); }), "r.json: half: expected an integer, found 2.5");
  EXPECT_EQ(message_of([&] { root.number_or("ranks", 0.0); }), "r.json: ranks: expected a number, found an array");
  EXPECT_EQ(message_of([&] { root.at("half").elements(); }), "r.json: half: expected an array, found a number");
}

TEST(JsonView, ViewsOfTheTopLevelSaySo) {
  const json doc = json::array();
  const JsonView root(doc, "r.json");
  EXPECT_EQ(message_of([&] { root.at("schema"); }), "r.json: (top level): expected an object, found an array");
}

}  // namespace
