// The parameter layout of a MoE model (models/transformer/param_layout.cpp)
// against the analytic count (analytic/params.cpp), written independently:
// the same units, the same tensor names and sizes; one rank only.
#include <gtest/gtest.h>

#include <map>
#include <stdexcept>

#include "analytic/params.h"
#include "core/layout.h"
#include "core/model_config.h"
#include "models/transformer/param_layout.h"

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

TEST(MoeLayout, OneTensorParallelRankOnly) {
  Layout two;
  two.tp = 2;
  EXPECT_THROW(make_param_layout(load_model("tiny-moe"), two, Coords{}), std::invalid_argument);
}

}  // namespace
}  // namespace gpuledger
