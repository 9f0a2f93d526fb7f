// Training from a Hugging Face checkpoint and a token file on several ranks
// (label mpi, np 2 and 4): each rank reads only its part of the checkpoint
// (models/io/hf_weights.h) and the run's losses equal the one-rank run's
// (computed in-process on every rank) to 1e-5 relative, and step 0's equals
// transformers' (tests/data, scripts/make_reference.py) to 1e-5 relative.
// Layouts: tp = 2 (the rest dp), pp = 2 (the rest dp), ZeRO 3 over every rank.
// The reference batch has 2 sequences; a global batch of 4 (dp = 4 with mbs 1)
// takes them twice (the token file wraps), so its mean loss is the same.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/registry/registry.h"
#include "models/io/hf_config.h"
#include "models/io/safetensors.h"
#include "parallel/groups.h"
#include "parallel/train_step.h"
#include "tests/parallel/mpi/mpi_world.h"

namespace gpuledger {
namespace {

using testing::world_size;

constexpr int kSteps = 2;
const std::string kData = GPULEDGER_TEST_DATA_DIR;

RunConfig make_run(const std::string& dir, const std::string& tokens) {
  RunConfig r;
  r.seq = 8;
  r.mbs = 1;
  r.microbatches = 2;
  r.dtype = r.grad_dtype = DType::kFP32;
  r.dropout = 0.0;
  r.grad_clip = 0.0;
  r.lr = 1e-3;
  r.weight_decay = 0.1;
  r.init_from = dir;
  r.tokens = dir + "/" + tokens;
  return r;
}

std::vector<double> losses(const ModelConfig& m, const RunConfig& r, const Layout& l, bool world) {
  Ledger ledger;
  auto dev = make_device("cpu", ledger);
  CommCounters counters;
  Groups g = world ? make_mpi_groups(l, counters, *dev, m.tied_embeddings) : make_single_groups(counters, *dev);
  Trainer trainer(*dev, m, r, g.context());
  std::vector<double> out;
  for (int s = 0; s < kSteps; ++s) out.push_back(trainer.step(s).loss);
  return out;
}

void check(const std::string& model, const std::string& tokens, Layout l) {
  const std::string dir = kData + "/" + model;
  const ModelConfig m = load_hf_config(dir + "/config.json");
  RunConfig r = make_run(dir, tokens);
  // The same global batch everywhere: mbs · microbatches · dp = 2 · world / … sequences.
  r.microbatches = std::max<int64_t>(1, 2 / l.dp);
  const std::vector<double> ours = losses(m, r, l, /*world=*/true);
  RunConfig one = r;
  one.microbatches = r.microbatches * l.dp;
  const std::vector<double> single = losses(m, one, Layout{}, /*world=*/false);
  for (int s = 0; s < kSteps; ++s)
    EXPECT_NEAR(ours[s], single[s], 1e-5 * single[s])
        << model << " step " << s << " dp " << l.dp << " tp " << l.tp << " pp " << l.pp << " zero " << l.zero;
  const double ref = SafetensorsFile(dir + "/reference.safetensors").read_all_fp32("loss")[0];
  EXPECT_NEAR(ours[0], ref, 1e-5 * ref) << model << " against transformers";
}

Layout tp2() { return Layout{world_size() / 2, 2, 1, 0, false}; }
Layout pp2() { return Layout{world_size() / 2, 1, 2, 0, false}; }
Layout zero3() { return Layout{world_size(), 1, 1, 3, false}; }

TEST(InitFromTrain, LlamaTensorParallel) { check("llama", "tokens.npy", tp2()); }
TEST(InitFromTrain, LlamaPipeline) { check("llama", "tokens.npy", pp2()); }
TEST(InitFromTrain, LlamaZero3) { check("llama", "tokens.npy", zero3()); }
TEST(InitFromTrain, Gpt2TensorParallel) { check("gpt2", "tokens.bin", tp2()); }
TEST(InitFromTrain, Gpt2Pipeline) { check("gpt2", "tokens.bin", pp2()); }
TEST(InitFromTrain, Gpt2Zero3) { check("gpt2", "tokens.bin", zero3()); }

}  // namespace
}  // namespace gpuledger
