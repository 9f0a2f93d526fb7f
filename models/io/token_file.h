// TokenFile: training (and prompt) tokens from a file, as a TokenSource.
// Two formats:
//   llm.c's token shards (karpathy/llm.c dev/data/data_common.py write_datafile,
//     llmc/dataloader.h, commit 7ecd8906): a header of 256 int32 — magic
//     20240520, version 1, token count — then the tokens as uint16;
//   NumPy .npy (format versions 1–3, little-endian, C order) of int32, int64 or
//     uint16: 1-D (one stream) or 2-D [n, seq + 1] (one sequence per row).
// Sequences (llm.c's convention: inputs are the first seq tokens, targets the
// next seq): sequence q = step·gbs + g of the run is
//   2-D: row q mod n;
//   1-D: tokens [k·seq, k·seq + seq + 1) with k = q mod ⌊(N − 1)/seq⌋ — as
//     llm.c's DataLoader strides B·T through the stream, here sequence by
//     sequence (it wraps to the start when the stream runs out).
// The file is mapped (mmap) and tokens are converted as they are read.
// Anything malformed is a ConfigError naming the file and the problem.
#pragma once
#include <cstdint>
#include <string>

#include "models/io/mapped_file.h"
#include "models/transformer/data.h"

namespace gpuledger {

class TokenFile final : public TokenSource {
 public:
  static constexpr int32_t kLlmcMagic = 20240520;

  explicit TokenFile(const std::string& path);  // throws ConfigError

  int64_t tokens() const { return count_; }           // all tokens in the file
  int64_t row_length() const { return row_length_; }  // 2-D: tokens per row; 1-D: 0
  const std::string& path() const { return path_; }

  // Throws ConfigError unless the file serves sequences of `seq` tokens (2-D:
  // rows of seq + 1; 1-D: at least seq + 1 tokens) with every token < vocab.
  void check_for(int64_t seq, int64_t vocab) const;

  // As prompts of `len` tokens: throws ConfigError unless every prompt fits
  // (2-D: len <= row length; 1-D: len <= the tokens) and every token < vocab.
  void check_prompts(int64_t len, int64_t vocab) const;
  // Prompt i: the first len tokens of row i mod n (2-D), or tokens
  // [k·len, k·len + len) with k = i mod ⌊N/len⌋ (1-D).
  void prompt(int64_t i, int64_t len, int32_t* out) const;

  // Tokens of sequence q (seq + 1 of them).
  void sequence(int64_t q, int64_t seq, int32_t* out) const;
  void batch(int64_t step, int64_t gbs, int64_t first, int64_t count, int64_t seq, int32_t* inputs,
             int32_t* targets) const override;

 private:
  enum class Elem { kU16, kI32, kI64 };
  int64_t token(int64_t i) const;
  void check_vocab(int64_t vocab) const;
  void parse_llmc();
  void parse_npy();

  std::string path_;
  MappedFile file_;
  Elem elem_ = Elem::kU16;
  int64_t data_begin_ = 0;  // bytes
  int64_t count_ = 0;
  int64_t row_length_ = 0;
};

}  // namespace gpuledger
