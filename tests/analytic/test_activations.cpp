// Activation bytes: the gpt flavour (dropout, materialized attention, bf16,
// f = 4h, k = a) equals each of the six rows of Korthikanti et al. 2022,
// Table 2, plus the norm statistics; llama and flash counted by hand; stage
// extras, in-flight microbatches (1F1B, GPipe) and the pipeline closed forms.
#include <gtest/gtest.h>

#include <map>

#include "analytic/activations.h"
#include "analytic/pipeline.h"
#include "core/layout.h"
#include "core/model_config.h"

namespace gpuledger::analytic {
namespace {

// tiny-gpt: h 64, a = k = 4, d 16 (a·d = h), f 256 = 4h, V 97.
// s 32, b 2 → sbh = 4096, 5as/h = 10, sb = 64.
struct GptCase {
  ModelConfig m = load_model("tiny-gpt");
  Layout l;
  RunConfig r;
  GptCase(int64_t tp, bool sp, Recompute rc) {
    l.tp = tp;
    l.sp = sp;
    r.seq = 32;
    r.mbs = 2;
    r.dropout = 0.1;
    r.attention = AttentionKind::kMaterialized;
    r.dtype = DType::kBF16;
    r.recompute = rc;
  }
  int64_t exact() const { return activation_bytes_per_layer(m, l, r); }
  int64_t stats() const { return norm_stat_bytes_per_layer(m, l, r); }
  double table2(KorthikantiRow row) const {
    return korthikanti_per_layer_bytes(row, 32, 2, 64, 4, static_cast<double>(l.tp));
  }
};

TEST(Korthikanti, RowNoParallel) {
  GptCase c(1, false, Recompute::kNone);
  // sbh(34 + 5as/h) = 4096·44; LayerNorm stats 2 norms × 2 × 4 bytes × sb.
  EXPECT_DOUBLE_EQ(c.table2(KorthikantiRow::kNoParallel), 180224.0);
  EXPECT_EQ(c.stats(), 16 * 64);
  EXPECT_EQ(c.exact(), 180224 + 1024);
  EXPECT_EQ(c.exact(), c.table2(KorthikantiRow::kNoParallel) + c.stats());
}

TEST(Korthikanti, RowTensor) {
  GptCase c(2, false, Recompute::kNone);
  // sbh(10 + 24/2 + 10/2) = 4096·27; stats not sharded without SP.
  EXPECT_DOUBLE_EQ(c.table2(KorthikantiRow::kTensor), 110592.0);
  EXPECT_EQ(c.stats(), 1024);
  EXPECT_EQ(c.exact(), c.table2(KorthikantiRow::kTensor) + c.stats());
}

TEST(Korthikanti, RowTensorSequence) {
  GptCase c(2, true, Recompute::kNone);
  // sbh(34/2 + 10/2) = 4096·22; stats on sequence shards: 512.
  EXPECT_DOUBLE_EQ(c.table2(KorthikantiRow::kTensorSequence), 90112.0);
  EXPECT_EQ(c.stats(), 512);
  EXPECT_EQ(c.exact(), c.table2(KorthikantiRow::kTensorSequence) + c.stats());
}

TEST(Korthikanti, RowTensorSelective) {
  GptCase c(2, false, Recompute::kSelective);
  // sbh(10 + 24/2) = 4096·22.
  EXPECT_DOUBLE_EQ(c.table2(KorthikantiRow::kTensorSelective), 90112.0);
  EXPECT_EQ(c.exact(), c.table2(KorthikantiRow::kTensorSelective) + c.stats());
  EXPECT_EQ(c.exact(), 90112 + 1024);
}

TEST(Korthikanti, RowTensorSequenceSelective) {
  GptCase c(2, true, Recompute::kSelective);
  // 34sbh/2 = 69632.
  EXPECT_DOUBLE_EQ(c.table2(KorthikantiRow::kTensorSequenceSelective), 69632.0);
  EXPECT_EQ(c.exact(), c.table2(KorthikantiRow::kTensorSequenceSelective) + c.stats());
  EXPECT_EQ(c.exact(), 69632 + 512);
}

TEST(Korthikanti, RowFullRecompute) {
  GptCase c(1, false, Recompute::kFull);
  // 2sbh: the layer input only, no statistics.
  EXPECT_DOUBLE_EQ(c.table2(KorthikantiRow::kFullRecompute), 8192.0);
  EXPECT_EQ(c.stats(), 0);
  EXPECT_EQ(c.exact(), c.table2(KorthikantiRow::kFullRecompute));
  // With TP (no SP) the layer input is replicated: still 2sbh; with SP, 2sbh/t.
  GptCase tp(2, false, Recompute::kFull);
  EXPECT_EQ(tp.exact(), 8192);
  GptCase sp(2, true, Recompute::kFull);
  EXPECT_EQ(sp.exact(), 4096);
}

TEST(Activations, GptWithoutDropoutDropsMasks) {
  GptCase c(1, false, Recompute::kNone);
  c.r.dropout = 0.0;
  // 34 − 2 mask bytes/elem of sbh; 5as²b − (mask + dropped probs) = 2as²b.
  EXPECT_EQ(c.exact(), 4096 * 32 + 2 * 4 * 32 * 32 * 2 + 1024);
}

// tiny-llama: h 64, a 4, k 2, d 16, f 176; s 16, b 1, bf16, no dropout.
struct LlamaCase {
  ModelConfig m = load_model("tiny-llama");
  Layout l;
  RunConfig r;
  LlamaCase() {
    r.seq = 16;
    r.mbs = 1;
    r.dropout = 0.0;
  }
  int64_t exact() const { return activation_bytes_per_layer(m, l, r); }
};

TEST(Activations, LlamaByHand) {
  LlamaCase c;
  // layer input, norm-1 out, context, norm-2 in, norm-2 out: 5 × 2·16·64 = 10240
  // RMSNorm rstd: 2 × 4·16 = 128; Q, K, V: a·d + 2·k·d = 64 + 64 → 2·16·128 = 4096;
  // probabilities 2·4·16² = 2048; gate, up, SwiGLU out: 3·2·16·176 = 16896.
  EXPECT_EQ(c.exact(), 10240 + 128 + 4096 + 2048 + 16896);
  EXPECT_EQ(norm_stat_bytes_per_layer(c.m, c.l, c.r), 128);

  c.r.attention = AttentionKind::kFlash;  // log-sum-exp 4·4·16 instead of probabilities
  EXPECT_EQ(c.exact(), 10240 + 128 + 4096 + 256 + 16896);
  c.r.dropout = 0.1;  // flash: two 1-byte hidden masks (16·64 each), no attention mask
  EXPECT_EQ(c.exact(), 10240 + 128 + 4096 + 256 + 16896 + 2048);
  c.r.recompute = Recompute::kSelective;  // the log-sum-exp goes
  EXPECT_EQ(c.exact(), 10240 + 128 + 4096 + 16896 + 2048);
}

TEST(Activations, LlamaTensorParallelReplicatedKv) {
  LlamaCase c;
  c.l.tp = 4;  // t > k: a_t = 1, k_t = 1 (replicated)
  // 4 hidden tensors (2·16·64) = 8192; stats 128; QKV 2·16·(16 + 32) = 1536;
  // probabilities 2·1·16² = 512; context 2·16·16 = 512; MLP 3·2·16·44 = 4224.
  EXPECT_EQ(c.exact(), 8192 + 128 + 1536 + 512 + 512 + 4224);
}

TEST(Activations, StageExtras) {
  // tiny-llama, tp 2 with SP (s_l = 8), pp 2, b 1, s 16, dropout > 0, bf16.
  ModelConfig m = load_model("tiny-llama");
  Layout l;
  l.tp = 2;
  l.sp = true;
  l.pp = 2;
  RunConfig r;
  r.seq = 16;
  r.mbs = 1;
  r.dropout = 0.1;
  // First: token ids 4·16 + embedding dropout mask 8·64.
  EXPECT_EQ(activation_stage_extra_bytes(m, l, r, 0), 64 + 512);
  // Last: final-norm in/out 2 × 2·8·64, rstd 4·8, logits 4·16·(256/2), targets 4·16.
  EXPECT_EQ(activation_stage_extra_bytes(m, l, r, 1), 2048 + 32 + 8192 + 64);
  // One stage holds both.
  l.pp = 1;
  EXPECT_EQ(activation_stage_extra_bytes(m, l, r, 0), 576 + 10336);
  // gpt: LayerNorm keeps mean and rstd (8·b·s_l); gpt dropout adds the same mask.
  ModelConfig g = load_model("tiny-gpt");
  EXPECT_EQ(activation_stage_extra_bytes(g, l, r, 0), 576 + 2048 + 64 + 8192 + 64);
}

TEST(Pipeline, InFlightClosedForms) {
  // 1F1B: min(p − i, m).
  EXPECT_EQ(microbatches_in_flight(Schedule::k1F1B, 4, 0, 8), 4);
  EXPECT_EQ(microbatches_in_flight(Schedule::k1F1B, 4, 1, 8), 3);
  EXPECT_EQ(microbatches_in_flight(Schedule::k1F1B, 4, 3, 8), 1);
  EXPECT_EQ(microbatches_in_flight(Schedule::k1F1B, 4, 0, 2), 2);
  EXPECT_EQ(microbatches_in_flight(Schedule::k1F1B, 4, 3, 2), 1);
  EXPECT_EQ(microbatches_in_flight(Schedule::k1F1B, 1, 0, 5), 1);
  // GPipe: m everywhere.
  EXPECT_EQ(microbatches_in_flight(Schedule::kGPipe, 4, 0, 8), 8);
  EXPECT_EQ(microbatches_in_flight(Schedule::kGPipe, 4, 3, 8), 8);
  EXPECT_EQ(microbatches_in_flight(Schedule::kGPipe, 1, 0, 5), 5);
  // Bubble (p − 1)/(m + p − 1).
  EXPECT_DOUBLE_EQ(bubble_fraction(4, 8), 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(bubble_fraction(1, 8), 0.0);
  EXPECT_DOUBLE_EQ(bubble_fraction(8, 1), 7.0 / 8.0);
}

TEST(Activations, PeakWithMicrobatchesInFlight) {
  // tiny-llama, 4 layers, pp 2, b 1, s 16, no dropout: per layer 33,408.
  ModelConfig m = with_layers(load_model("tiny-llama"), 4);
  Layout l;
  l.pp = 2;
  RunConfig r;
  r.seq = 16;
  r.mbs = 1;
  r.microbatches = 6;
  const int64_t layer = 33408;
  const int64_t first = 2 * layer + 64;                               // + token ids
  const int64_t last = 2 * layer + 2 * 2048 + 64 + 4 * 16 * 97 + 64;  // V' = V at t = 1
  EXPECT_EQ(activation_bytes_per_microbatch(m, l, r, 0), first);
  EXPECT_EQ(activation_bytes_per_microbatch(m, l, r, 1), last);
  r.schedule = Schedule::k1F1B;
  EXPECT_EQ(activation_peak_bytes(m, l, r, 0), 2 * first);
  EXPECT_EQ(activation_peak_bytes(m, l, r, 1), 1 * last);
  r.schedule = Schedule::kGPipe;
  EXPECT_EQ(activation_peak_bytes(m, l, r, 0), 6 * first);
  EXPECT_EQ(activation_peak_bytes(m, l, r, 1), 6 * last);
}

std::map<std::string, double> by_name(const std::vector<Published>& ps) {
  std::map<std::string, double> m;
  for (const auto& p : ps) m[p.name] = p.value;
  return m;
}

TEST(PublishedActivations, RowAndPipelineRule) {
  // tiny-gpt with 8 layers, tp 2, SP, selective, pp 4, m 2, 1F1B.
  ModelConfig m = with_layers(load_model("tiny-gpt"), 8);
  Layout l;
  l.tp = 2;
  l.sp = true;
  l.pp = 4;
  RunConfig r;
  r.seq = 32;
  r.mbs = 2;
  r.microbatches = 2;
  r.recompute = Recompute::kSelective;
  const double row = 34.0 * 4096 / 2;  // 34sbh/t
  auto p = by_name(published_activations(m, l, r, 0));
  EXPECT_DOUBLE_EQ(p.at("korthikanti_per_layer"), row);
  // First stage: L layers' worth × min(1, m/p) = 8 · 1/2 rows (Eq. 5).
  EXPECT_DOUBLE_EQ(p.at("korthikanti_stage"), 8 * 0.5 * row);
  // + embedding dropout sbh/t per microbatch in flight (2).
  EXPECT_DOUBLE_EQ(p.at("korthikanti_stage_with_extras"), 8 * 0.5 * row + 2 * 4096 / 2.0);
  // The six rows at t = 2.
  EXPECT_DOUBLE_EQ(p.at("korthikanti_table2.no_parallel"), 180224.0);
  EXPECT_DOUBLE_EQ(p.at("korthikanti_table2.tensor"), 110592.0);
  EXPECT_DOUBLE_EQ(p.at("korthikanti_table2.tensor_sequence"), 90112.0);
  EXPECT_DOUBLE_EQ(p.at("korthikanti_table2.tensor_selective"), 90112.0);
  EXPECT_DOUBLE_EQ(p.at("korthikanti_table2.tensor_sequence_selective"), 69632.0);
  EXPECT_DOUBLE_EQ(p.at("korthikanti_table2.full_recompute"), 8192.0);

  // Last stage: one microbatch in flight, 2 layers; extras 4sbh/t + 4sbv/t.
  p = by_name(published_activations(m, l, r, 3));
  EXPECT_DOUBLE_EQ(p.at("korthikanti_stage"), 2 * row);
  EXPECT_DOUBLE_EQ(p.at("korthikanti_stage_with_extras"), 2 * row + 4.0 * 4096 / 2 + 4.0 * 32 * 2 * 97 / 2);

  // The matching row follows the run: t = 2 without SP or recompute → "tensor".
  l.sp = false;
  r.recompute = Recompute::kNone;
  p = by_name(published_activations(m, l, r, 1));
  EXPECT_DOUBLE_EQ(p.at("korthikanti_per_layer"), 110592.0);
  EXPECT_DOUBLE_EQ(p.at("korthikanti_stage"), 2 * 2 * 110592.0);  // min(4 − 1, 2) = 2
  // GPipe holds all m.
  r.schedule = Schedule::kGPipe;
  r.microbatches = 5;
  p = by_name(published_activations(m, l, r, 1));
  EXPECT_DOUBLE_EQ(p.at("korthikanti_stage"), 5 * 2 * 110592.0);
}

// Context parallelism: a rank saves the tensors of its s/cp tokens only — with
// the flash core every saved tensor is per token (the log-sum-exp too), so a
// rank of cp 4 at seq 8192 saves what one rank saves at seq 2048, byte for byte.
TEST(Activations, ContextParallelSavesTheLocalTokens) {
  const ModelConfig m = load_model("llama3-8b");
  RunConfig r;
  r.mbs = 1;
  r.attention = AttentionKind::kFlash;
  RunConfig quarter = r;
  r.seq = 8192;
  quarter.seq = 2048;
  Layout cp;
  cp.cp = 4;
  const Layout one;
  EXPECT_EQ(activation_bytes_per_layer(m, cp, r), activation_bytes_per_layer(m, one, quarter));
  EXPECT_EQ(activation_peak_bytes(m, cp, r, 0), activation_peak_bytes(m, one, quarter, 0));
  // By hand at seq 2048, b 1, h 4096, a 32, k 8, d 128, f 14336, bf16, no dropout:
  // input, norm-1 out, norm-2 in, norm-2 out 4·2·2048·4096; two rstd 2·4·2048;
  // Q K V 2·2048·(32 + 16)·128; lse 4·32·2048; context 2·2048·4096;
  // gate, up, SwiGLU out 3·2·2048·14336.
  const int64_t s = 2048;
  const int64_t want = 4 * 2 * s * 4096 + 2 * 4 * s + 2 * s * 48 * 128 + 4 * 32 * s + 2 * s * 4096 + 3 * 2 * s * 14336;
  EXPECT_EQ(activation_bytes_per_layer(m, cp, r), want);
}

}  // namespace
}  // namespace gpuledger::analytic
