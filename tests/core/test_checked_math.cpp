// Checked arithmetic (core/checked_math.h) and the limits (core/limits.h):
// in range the exact value, one past int64 an OverflowError naming the
// quantity; a bound one past its limit a ConfigError naming field and limit.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "core/account.h"
#include "core/checked_math.h"
#include "core/layout.h"
#include "core/limits.h"
#include "core/model_config.h"
#include "core/run_config.h"

namespace gpuledger {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

TEST(CheckedMath, ExactInRange) {
  EXPECT_EQ(checked_add(kMax - 5, 5, "x"), kMax);
  EXPECT_EQ(checked_add(kMin + 5, -5, "x"), kMin);
  EXPECT_EQ(checked_mul(int64_t{3037000499}, int64_t{3037000499}, "x"), int64_t{9223372030926249001});
  EXPECT_EQ(checked_mul(-(int64_t{1} << 62), 2, "x"), kMin);
  EXPECT_EQ(checked_product({2, 3, 5, 7}, "x"), 210);
  EXPECT_EQ(checked_sum(std::vector<int64_t>{kMax - 3, 1, 2}, "x"), kMax);
}

TEST(CheckedMath, OverflowNamesTheQuantity) {
  EXPECT_THROW(checked_add(kMax, 1, "x"), OverflowError);
  EXPECT_THROW(checked_add(kMin, -1, "x"), OverflowError);
  EXPECT_THROW(checked_mul(int64_t{3037000500}, int64_t{3037000500}, "x"), OverflowError);
  EXPECT_THROW(checked_mul(kMin, -1, "x"), OverflowError);
  EXPECT_THROW(checked_sum(std::vector<int64_t>{kMax, 1}, "x"), OverflowError);
  try {
    checked_product({int64_t{1} << 32, int64_t{1} << 31}, "KV reserved bytes");
    FAIL() << "2^63 fits?";
  } catch (const OverflowError& e) {
    EXPECT_EQ(e.quantity(), "KV reserved bytes");
    EXPECT_NE(std::string(e.what()).find("KV reserved bytes does not fit in a 64-bit integer"), std::string::npos);
  }
}

TEST(CheckedMath, WorldAndAccountTotalsAreChecked) {
  Layout l;
  l.dp = int64_t{1} << 21;
  l.tp = int64_t{1} << 21;
  l.pp = int64_t{1} << 21;
  EXPECT_THROW((void)l.world(), OverflowError);  // 2^63: one past int64
  l.pp = int64_t{1} << 20;
  EXPECT_EQ(l.world(), int64_t{1} << 62);
  AccountBytes b;
  b[Account::kWeights] = kMax;
  EXPECT_EQ(b.device_total(), kMax);
  b[Account::kGrads] = 1;
  EXPECT_THROW((void)b.device_total(), OverflowError);
}

TEST(Limits, CheckRangeNamesFieldAndLimit) {
  EXPECT_NO_THROW(limits::check_range("--requests", limits::kMaxBatch, 1, limits::kMaxBatch));
  try {
    limits::check_range("--requests", limits::kMaxBatch + 1, 1, limits::kMaxBatch);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), "--requests");
    EXPECT_STREQ(e.what(), "--requests 1048577 is above the limit 1048576");
  }
  EXPECT_THROW(limits::check_range("--requests", 0, 1, limits::kMaxBatch), ConfigError);
}

TEST(Limits, LayoutBoundsAreCheckedBeforeAnyProduct) {
  ModelConfig m = parse_model_config(
      R"({"name":"m","flavour":"llama","layers":2,"hidden":64,"heads":4,"ffn":176,"vocab":97,"max_seq":64})", "t");
  RunConfig r;
  r.seq = 64;
  Layout l;
  l.dp = limits::kMaxWorld;
  EXPECT_NO_THROW(validate_layout(l, m, r));
  l.pp = 2;
  try {
    validate_layout(l, m, r);
    FAIL();
  } catch (const LayoutError& e) {
    EXPECT_STREQ(e.what(), "world = dp·tp·pp 2097152 is above the limit 1048576");
  }
  l = Layout{};
  r.seq = limits::kMaxTokens + 1;
  EXPECT_THROW(validate_layout(l, m, r), LayoutError);
}

}  // namespace
}  // namespace gpuledger
