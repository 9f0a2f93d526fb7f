// The implementation's parameter layout (models/transformer/param_layout.h)
// against the analytic tensor count (analytic/params.h; the two are
// written independently from docs/exact-budget.md): the same units with the
// same element counts on every rank role of tp × pp layouts, for GPT, Llama
// (GQA, replicated KV heads when t > k), Qwen (QKV bias) and tied embeddings.
// Then the initialisation: a TP slice holds exactly the values of the t = 1
// tensor, padded vocabulary rows are zero, and the statistics are N(0, 0.02²)
// with the 1/sqrt(2L) residual scaling.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include <algorithm>

#include "analytic/params.h"
#include "core/model_config.h"
#include "core/run_config.h"
#include "models/transformer/param_layout.h"
#include "models/transformer/params.h"

namespace gpuledger {
namespace {

Layout make_layout(int64_t tp, int64_t pp) {
  Layout l;
  l.tp = tp;
  l.pp = pp;
  return l;
}

TEST(ParamLayout, SameUnitsAndCountsAsTheAnalyticSide) {
  int checked = 0;
  for (const char* name :
       {"tiny-gpt", "tiny-llama", "small-gpt", "llama2-7b", "llama3-8b", "qwen2.5-7b", "mistral-7b", "gpt2"})
    for (int64_t tp : {1, 2, 4, 8})
      for (int64_t pp : {1, 2, 4}) {
        ModelConfig m = load_model(name);
        const Layout l = make_layout(tp, pp);
        RunConfig r;
        r.seq = 8;
        try {
          validate_layout(l, m, r);
        } catch (const LayoutError&) {
          continue;  // does not divide
        }
        for (int64_t stage = 0; stage < pp; ++stage)
          for (int64_t j = 0; j < tp; ++j) {
            const Coords c{0, j, stage};
            SCOPED_TRACE(std::string(name) + " tp " + std::to_string(tp) + " pp " + std::to_string(pp) + " stage " +
                         std::to_string(stage) + " tp rank " + std::to_string(j));
            const ParamLayout mine = make_param_layout(m, l, c);
            const auto theirs = analytic::rank_param_units(m, l, l.rank(c));
            ASSERT_EQ(mine.units.size(), theirs.size());
            for (size_t u = 0; u < theirs.size(); ++u) {
              EXPECT_EQ(mine.units[u].name, theirs[u].name);
              EXPECT_EQ(mine.units[u].elems, theirs[u].elems()) << theirs[u].name;
              int64_t sum = 0;
              for (const auto& t : mine.units[u].tensors) {
                EXPECT_EQ(t.offset, sum) << t.name << ": tensors are packed";
                sum += t.elems();
              }
              EXPECT_EQ(sum, mine.units[u].elems);
            }
            EXPECT_EQ(mine.vocab_padded, analytic::padded_vocab(m, tp));
            ++checked;
          }
      }
  EXPECT_GT(checked, 100);
}

TEST(ParamLayout, HandCountsTinyGpt) {
  // tiny-gpt: h 64, a = k = 4, d 16, f 256, V 97, max_seq 64, tied, 2 layers.
  const ParamLayout pl = make_param_layout(load_model("tiny-gpt"), Layout{}, Coords{});
  ASSERT_EQ(pl.units.size(), 4u);
  EXPECT_EQ(pl.units[0].elems, 97 * 64 + 64 * 64);  // word + positions
  // qkv 64·192 + 192, out 64·64 + 64, two LayerNorms 4·64, MLP 64·256 + 256 + 256·64 + 64
  EXPECT_EQ(pl.units[1].elems, 64 * 192 + 192 + 64 * 64 + 64 + 4 * 64 + 64 * 256 + 256 + 256 * 64 + 64);
  EXPECT_EQ(pl.units[3].elems, 2 * 64);  // tied, one stage: final norm only
  EXPECT_TRUE(pl.head_uses_embedding);
  const int64_t matrices = 64 * 192 + 64 * 64 + 2 * 64 * 256;  // the four matrices, then the vectors
  const auto runs = pl.units[1].decay_runs();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].begin, 0);
  EXPECT_EQ(runs[0].end, matrices);
  EXPECT_TRUE(runs[0].decay);
  EXPECT_EQ(runs[1].begin, matrices);
  EXPECT_EQ(runs[1].end, pl.units[1].elems);
  EXPECT_FALSE(runs[1].decay);
}

// gpt-oss's tensors on tiny-moe (h 32, a 4, k 2, d 8, E 4, f_e 24, one shared
// expert f_s 16): the experts' matrices (3·4·24·32 = 9216) and their biases
// (gate 96, up 96, down 4·32 = 128) form the expert-sharded prefix; then the
// matrices qkv 64·32, attention-out 32·32, router 4·32, shared 3·16·32 (4736),
// then the vectors norm1 32, attention-out bias 32, sinks 4, router bias 4,
// norm2 32. Weight decay falls on the two runs of matrices only.
TEST(ParamLayout, GptOssTensorsAndDecayRuns) {
  ModelConfig m = load_model("tiny-moe");
  m.attention_sinks = m.attn_out_bias = m.router_logit_bias = m.expert_biases = true;
  const ParamLayout pl = make_param_layout(m, Layout{}, Coords{});
  const UnitLayout& u = pl.units[1];
  EXPECT_EQ(u.at("moe.experts.gate.bias").elems(), 96);
  EXPECT_EQ(u.at("moe.experts.down.bias").elems(), 128);
  EXPECT_EQ(u.at("moe.experts.down.bias").offset + 128, 9216 + 320);
  EXPECT_EQ(u.at("attn.sinks").elems(), 4);
  EXPECT_EQ(u.at("attn_out.bias").elems(), 32);
  EXPECT_EQ(u.at("moe.router.logit_bias").elems(), 4);
  EXPECT_EQ(u.elems, 9216 + 320 + 4736 + 104);
  const auto runs = u.decay_runs();
  ASSERT_EQ(runs.size(), 4u);
  const int64_t ends[] = {9216, 9536, 9536 + 4736, u.elems};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(runs[i].begin, i == 0 ? 0 : ends[i - 1]) << i;
    EXPECT_EQ(runs[i].end, ends[i]) << i;
    EXPECT_EQ(runs[i].decay, i % 2 == 0) << i;
  }
  // Under tp 2 each rank holds the sinks of its own two heads.
  ModelConfig dense = load_model("tiny-llama");
  dense.attention_sinks = true;
  Layout l;
  l.tp = 2;
  Coords c;
  c.tp = 1;
  const ParamLayout tp2 = make_param_layout(dense, l, c);
  const TensorSlot& sinks = tp2.units[1].at("attn.sinks");
  EXPECT_EQ(sinks.elems(), 2);
  EXPECT_EQ(sinks.row_begin, 2);
}

TEST(ParamLayout, PaddedVocabulary) {
  EXPECT_EQ(padded_vocab_size(97, 1), 97);
  EXPECT_EQ(padded_vocab_size(97, 2), 256);       // ⌈97/256⌉·256
  EXPECT_EQ(padded_vocab_size(32000, 8), 32768);  // ⌈32000/1024⌉·1024
  EXPECT_EQ(padded_vocab_size(50257, 1), 50257);
  EXPECT_EQ(padded_vocab_size(50257, 2), 50432);  // ⌈50257/256⌉·256
  EXPECT_EQ(kv_heads_on_rank(8, 2), 4);
  EXPECT_EQ(kv_heads_on_rank(2, 4), 1);  // replicated
}

// Every element of every TP rank's tensors equals the t = 1 tensor's element
// it stands for; padding rows are 0.
TEST(ParamInit, TensorParallelSlicesHoldTheOneRankValues) {
  for (const char* name : {"tiny-gpt", "tiny-llama"})
    for (int64_t tp : {2, 4}) {
      const ModelConfig m = load_model(name);
      const ParamLayout one = make_param_layout(m, Layout{}, Coords{});
      std::vector<std::vector<float>> ref;
      for (const auto& u : one.units) ref.push_back(init_unit_values(u, 42, m.layers));
      for (int64_t j = 0; j < tp; ++j) {
        const ParamLayout pl = make_param_layout(m, make_layout(tp, 1), Coords{0, j, 0});
        for (size_t u = 0; u < pl.units.size(); ++u) {
          const auto v = init_unit_values(pl.units[u], 42, m.layers);
          for (const TensorSlot& t : pl.units[u].tensors) {
            const TensorSlot* full = one.units[u].find(t.role);
            ASSERT_NE(full, nullptr) << t.name;
            int64_t padded = 0;
            for (int64_t r = 0; r < t.rows; ++r)
              for (int64_t c = 0; c < t.cols; ++c) {
                const float got = v[t.offset + r * t.cols + c];
                const auto gi = global_element_index(t, r, c);
                if (!gi) {
                  ++padded;
                  ASSERT_EQ(got, 0.0f) << t.name << " padding row " << r;
                  continue;
                }
                ASSERT_LT(*gi, full->elems()) << t.name;
                ASSERT_EQ(got, ref[u][full->offset + *gi])
                    << name << " tp " << tp << " rank " << j << " " << t.name << " (" << r << ", " << c << ")";
              }
            if (t.role == "word.weight" || t.role == "output.weight") {
              // rank j holds rows [j·V'/t, (j+1)·V'/t); those >= V are padding
              const int64_t rows = padded_vocab_size(m.vocab, tp) / tp;
              const int64_t real = std::clamp<int64_t>(m.vocab - j * rows, 0, rows);
              EXPECT_EQ(padded, (rows - real) * t.cols) << t.name;
            }
          }
        }
      }
    }
}

TEST(ParamInit, StatisticsAndSpecialValues) {
  const ModelConfig m = load_model("small-llama");  // h 256, f 688, 4 layers
  const ParamLayout pl = make_param_layout(m, Layout{}, Coords{});
  const auto& unit = pl.units[1];
  const auto v = init_unit_values(unit, 3, m.layers);
  auto stats = [&](const TensorSlot& t) {
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < t.elems(); ++i) {
      s += v[t.offset + i];
      s2 += static_cast<double>(v[t.offset + i]) * v[t.offset + i];
    }
    const double n = static_cast<double>(t.elems());
    return std::pair<double, double>{s / n, std::sqrt(s2 / n - (s / n) * (s / n))};
  };
  const auto [mq, sq] = stats(unit.at("qkv.weight"));  // 256·(8+4)·32 ≈ 98k samples
  EXPECT_NEAR(mq, 0.0, 0.001);
  EXPECT_NEAR(sq, 0.02, 0.0005);
  const auto [mo, so] = stats(unit.at("mlp_out.weight"));  // ·1/sqrt(2·4)
  EXPECT_NEAR(mo, 0.0, 0.001);
  EXPECT_NEAR(so, 0.02 / std::sqrt(8.0), 0.0003);
  const TensorSlot& g = unit.at("norm1.weight");
  for (int64_t i = 0; i < g.elems(); ++i) EXPECT_EQ(v[g.offset + i], 1.0f);
  // another seed, other values
  EXPECT_NE(init_unit_values(unit, 4, m.layers), v);
}

}  // namespace
}  // namespace gpuledger
