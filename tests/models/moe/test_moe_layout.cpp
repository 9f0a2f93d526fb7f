// The parameter layout of a MoE model (models/transformer/param_layout.cpp)
// against the analytic count (analytic/params.cpp), written independently:
// the same units, the same tensor names and sizes; one rank only; and
// ZeRO's parts of a MoE layer's unit against the analytic shard sizes.
#include <gtest/gtest.h>

#include <map>
#include <stdexcept>

#include "analytic/params.h"
#include "core/layout.h"
#include "core/model_config.h"
#include "models/transformer/param_layout.h"
#include "models/transformer/unit_shard.h"

namespace gpuledger {
namespace {

TEST(MoeLayout, SameTensorsAsTheAnalyticSide) {
  for (const char* name : {"tiny-moe", "mixtral-8x7b"}) {
    SCOPED_TRACE(name);
    const ModelConfig m = load_model(name);
    const ParamLayout mine = make_param_layout(m, Layout{}, Coords{});
    const auto theirs = analytic::rank_param_units(m, Layout{}, 0);
    ASSERT_EQ(mine.units.size(), theirs.size());
    for (size_t u = 0; u < theirs.size(); ++u) {
      EXPECT_EQ(mine.units[u].name, theirs[u].name);
      EXPECT_EQ(mine.units[u].elems, theirs[u].elems());
      std::map<std::string, int64_t> a, b;
      for (const auto& t : mine.units[u].tensors) a[t.name] = t.elems();
      for (const auto& t : theirs[u].tensors) b[t.name] = t.elems;
      EXPECT_EQ(a, b);
    }
  }
  // tiny-moe layer: the router 4·32, experts 3·4·24·32, the shared expert 3·16·32
  const ParamLayout pl = make_param_layout(load_model("tiny-moe"), Layout{}, Coords{});
  const UnitLayout& layer = pl.units[1];
  EXPECT_EQ(layer.at("moe.router.weight").rows, 4);
  EXPECT_EQ(layer.at("moe.experts.down.weight").rows, 4 * 32);
  EXPECT_EQ(layer.at("moe.experts.down.weight").cols, 24);
  EXPECT_EQ(layer.at("moe.shared.down.weight").cols, 16);
  EXPECT_EQ(layer.find("mlp_gate.weight"), nullptr);
}

// ZeRO's parts of a MoE layer's unit (models/transformer/unit_shard.h): under
// ep > 1 the routed experts, the unit's prefix, over the expert-data-parallel
// group, the rest over dp. tiny-moe at dp 4, ep 2: 4,608 expert elements over
// 2 ranks (2,304 each), 4,800 dense ones over 4 (1,200 each); and on every
// rank of several layouts the shard and padded sizes equal the analytic
// ParamUnit's (analytic/params.h), unit by unit.
TEST(MoeLayout, ZeroPartsShardTheExpertsOverTheExpertDataParallelGroup) {
  const ModelConfig m = load_model("tiny-moe");
  Layout l;
  l.dp = 4;
  l.ep = 2;
  l.zero = 1;
  const ParamLayout pl = make_param_layout(m, l, l.coords(3));
  const UnitLayout& layer = pl.units[1];
  EXPECT_EQ(layer.at("moe.experts.gate.weight").offset, 0);  // the experts first
  const UnitShard sh = unit_shard(layer, ShardGroups{4, 3, 2, 1});
  ASSERT_EQ(sh.parts.size(), 2u);
  EXPECT_TRUE(sh.parts[0].expert);
  EXPECT_EQ(sh.parts[0].elems, 4608);
  EXPECT_EQ(sh.parts[0].shard_elems, 2304);
  EXPECT_EQ(sh.parts[0].begin, 2304);
  EXPECT_EQ(sh.parts[1].off, 4608);
  EXPECT_EQ(sh.parts[1].elems, 4800);
  EXPECT_EQ(sh.parts[1].begin, 4608 + 3 * 1200);
  EXPECT_EQ(sh.parts[1].shard_at, 2304);
  EXPECT_EQ(sh.shard_elems, 3504);
  EXPECT_EQ(sh.padded_elems, 9408);
  EXPECT_EQ(sh.padded_offset(layer.at("qkv.weight").offset), 4608);
  for (auto [dp, ep] : {std::pair{2, 1}, {3, 1}, {4, 2}, {6, 2}, {4, 4}})
    for (int64_t rank = 0; rank < dp; ++rank) {
      Layout x;
      x.dp = dp;
      x.ep = ep;
      x.zero = 3;
      const int64_t d = x.coords(rank).dp;
      const ParamLayout mine = make_param_layout(m, x, x.coords(rank));
      const auto theirs = analytic::rank_param_units(m, x, rank);
      ASSERT_EQ(mine.units.size(), theirs.size());
      for (size_t u = 0; u < theirs.size(); ++u) {
        const UnitShard s = unit_shard(mine.units[u], ShardGroups{dp, d, dp / ep, d / ep});
        EXPECT_EQ(s.shard_elems, theirs[u].shard_elems(x)) << "dp " << dp << " ep " << ep << " " << theirs[u].name;
        EXPECT_EQ(s.padded_elems, theirs[u].padded_elems(x)) << "dp " << dp << " ep " << ep << " " << theirs[u].name;
      }
    }
}

TEST(MoeLayout, OneTensorParallelRankOnly) {
  Layout two;
  two.tp = 2;
  EXPECT_THROW(make_param_layout(load_model("tiny-moe"), two, Coords{}), std::invalid_argument);
}

}  // namespace
}  // namespace gpuledger
