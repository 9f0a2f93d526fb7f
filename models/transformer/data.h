// Synthetic, learnable training data, deterministic from the run's seed: a
// fixed random bigram chain over the V tokens.
//
//   successor table: succ[v] = ⌊u·V⌋ of the Philox word of element v under the
//     key (seed ^ kDataSeedSalt, stream kSuccessorStream) — one fixed random
//     map V → V per seed;
//   sequence g of the global batch of step k (g = 0 … gbs − 1): Philox key
//     (seed ^ kDataSeedSalt, stream k·gbs + g); token 0 is uniform; token i > 0
//     is succ[token i−1] with probability 0.75, else uniform over V (block i
//     of the stream: word 0 decides, word 1 draws the uniform token);
//   s + 1 tokens are generated per sequence: inputs are tokens 0 … s − 1,
//     targets tokens 1 … s (the next token).
//
// Any layout sees the same global batch: data-parallel replica r, microbatch j
// (mbs b, m per replica) takes sequences r·m·b + j·b … + b − 1.
//
// The best achievable loss is the chain's entropy rate (every state has the
// same next-token distribution up to relabelling: succ with 0.75 + 0.25/V, any
// other token 0.25/V), see bigram_entropy_rate_nats. A model that has learnt
// nothing scores ln V.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpuledger {

// Where a training step's tokens come from: the synthetic chain below, or a
// token file (models/io/token_file.h). Sequence g of the global batch (gbs
// sequences) of step `step` is the same on every layout.
class TokenSource {
 public:
  virtual ~TokenSource() = default;
  // Inputs (count × seq) and targets (count × seq, the next tokens) of
  // sequences first … first + count − 1 of the global batch of step `step`.
  virtual void batch(int64_t step, int64_t gbs, int64_t first, int64_t count, int64_t seq, int32_t* inputs,
                     int32_t* targets) const = 0;
};

class BigramData final : public TokenSource {
 public:
  static constexpr double kFollowProb = 0.75;
  static constexpr uint64_t kDataSeedSalt = 0xD1B54A32D192ED03ull;  // keeps data draws apart from dropout's
  static constexpr uint64_t kSuccessorStream = ~uint64_t{0};

  BigramData(int64_t vocab, uint64_t seed);

  int64_t vocab() const { return vocab_; }
  int32_t successor(int32_t token) const { return succ_[static_cast<size_t>(token)]; }

  // Tokens (count × (seq + 1)) of sequences first … first + count − 1 of the
  // global batch (gbs sequences) of step `step`.
  void sequences(int64_t step, int64_t gbs, int64_t first, int64_t count, int64_t seq, int32_t* out) const;
  // The same split into inputs (count × seq) and targets (count × seq).
  void batch(int64_t step, int64_t gbs, int64_t first, int64_t count, int64_t seq, int32_t* inputs,
             int32_t* targets) const override;

 private:
  int64_t vocab_;
  uint64_t key_;
  std::vector<int32_t> succ_;
};

// Entropy rate of the chain, nats per token: −p1·ln p1 − (V − 1)·q·ln q with
// q = (1 − 0.75)/V and p1 = 0.75 + q. The floor of the mean cross-entropy.
double bigram_entropy_rate_nats(int64_t vocab, double follow = BigramData::kFollowProb);

}  // namespace gpuledger
