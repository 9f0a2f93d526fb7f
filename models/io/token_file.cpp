// TokenFile (see token_file.h).
#include "models/io/token_file.h"

#include <cstring>
#include <regex>
#include <vector>

#include "core/model_config.h"

namespace gpuledger {

namespace {

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw ConfigError("tokens", path + ": " + what);
}

}  // namespace

TokenFile::TokenFile(const std::string& path) : path_(path), file_(path, "tokens") {
  if (file_.size_bytes() >= 6 && std::memcmp(file_.data(), "\x93NUMPY", 6) == 0)
    parse_npy();
  else
    parse_llmc();
}

void TokenFile::parse_llmc() {
  constexpr int64_t kHeaderBytes = 256 * 4;
  if (file_.size_bytes() < kHeaderBytes)
    bad(path_, "neither a .npy file nor an llm.c token file (shorter than its 1024-byte header)");
  int32_t header[256];
  std::memcpy(header, file_.data(), sizeof header);
  if (header[0] != kLlmcMagic)
    bad(path_, "neither a .npy file nor an llm.c token file (magic " + std::to_string(header[0]) + ", llm.c's is " +
                   std::to_string(kLlmcMagic) + ")");
  if (header[1] != 1)
    bad(path_, "llm.c token file version " + std::to_string(header[1]) + ": gpuledger reads version 1 (uint16 tokens)");
  count_ = header[2];
  if (count_ <= 0 || file_.size_bytes() != kHeaderBytes + 2 * count_)
    bad(path_, "the header counts " + std::to_string(count_) + " tokens (" + std::to_string(kHeaderBytes + 2 * count_) +
                   " bytes with the header), the file has " + std::to_string(file_.size_bytes()) + " bytes");
  elem_ = Elem::kU16;
  data_begin_ = kHeaderBytes;
}

// The .npy format (numpy/lib/format.py, "Format Version 1.0" … "3.0"): magic,
// major, minor, header length (uint16 for 1.x, uint32 after), then a Python
// dict literal {'descr': '<i4', 'fortran_order': False, 'shape': (n, m), }.
void TokenFile::parse_npy() {
  const char* d = file_.data();
  const int64_t size = file_.size_bytes();
  if (size < 10) bad(path_, ".npy file shorter than its header");
  const int major = static_cast<unsigned char>(d[6]);
  int64_t header_len = 0, pre = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(d[8]) | (static_cast<unsigned char>(d[9]) << 8);
    pre = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) bad(path_, ".npy file shorter than its header");
    uint32_t len = 0;
    std::memcpy(&len, d + 8, 4);
    header_len = len;
    pre = 12;
  } else {
    bad(path_, ".npy format version " + std::to_string(major) + " unknown");
  }
  if (pre + header_len > size) bad(path_, ".npy header runs past the end of the file");
  const std::string h(d + pre, static_cast<size_t>(header_len));
  std::smatch mt;
  if (!std::regex_search(h, mt, std::regex(R"('descr'\s*:\s*'([^']*)')"))) bad(path_, ".npy header has no descr");
  const std::string descr = mt[1];
  if (descr == "<u2" || descr == "|u2")
    elem_ = Elem::kU16;
  else if (descr == "<i4")
    elem_ = Elem::kI32;
  else if (descr == "<i8")
    elem_ = Elem::kI64;
  else
    bad(path_, ".npy dtype '" + descr + "': gpuledger reads int32, int64 and uint16 (little-endian)");
  if (std::regex_search(h, std::regex(R"('fortran_order'\s*:\s*True)")))
    bad(path_, ".npy array in Fortran order: save it in C order");
  if (!std::regex_search(h, mt, std::regex(R"('shape'\s*:\s*\(([^)]*)\))"))) bad(path_, ".npy header has no shape");
  std::vector<int64_t> shape;
  const std::string dims = mt[1];
  const std::regex digits(R"(\d+)");
  for (std::sregex_iterator it(dims.begin(), dims.end(), digits), end; it != end; ++it)
    shape.push_back(std::stoll(it->str()));
  if (shape.empty() || shape.size() > 2)
    bad(path_, ".npy array of " + std::to_string(shape.size()) + " dimensions: tokens are 1-D or [n, seq + 1]");
  count_ = shape.size() == 1 ? shape[0] : shape[0] * shape[1];
  row_length_ = shape.size() == 2 ? shape[1] : 0;
  data_begin_ = pre + header_len;
  const int64_t eb = elem_ == Elem::kU16 ? 2 : elem_ == Elem::kI32 ? 4 : 8;
  if (count_ <= 0) bad(path_, ".npy array holds no tokens");
  if (data_begin_ + count_ * eb != size)
    bad(path_, ".npy shape needs " + std::to_string(count_ * eb) + " bytes of data, the file has " +
                   std::to_string(size - data_begin_));
}

int64_t TokenFile::token(int64_t i) const {
  const char* p = file_.data() + data_begin_;
  switch (elem_) {
    case Elem::kU16: {
      uint16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      return v;
    }
    case Elem::kI32: {
      int32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    case Elem::kI64: {
      int64_t v;
      std::memcpy(&v, p + 8 * i, 8);
      return v;
    }
  }
  return 0;
}

void TokenFile::check_for(int64_t seq, int64_t vocab) const {
  if (row_length_ > 0 && row_length_ != seq + 1)
    bad(path_, "rows of " + std::to_string(row_length_) + " tokens, --seq " + std::to_string(seq) + " needs rows of " +
                   std::to_string(seq + 1) + " (inputs and the next-token targets)");
  if (row_length_ == 0 && count_ < seq + 1)
    bad(path_, std::to_string(count_) + " tokens, fewer than one sequence of --seq " + std::to_string(seq) + " + 1");
  check_vocab(vocab);
}

void TokenFile::check_vocab(int64_t vocab) const {
  for (int64_t i = 0; i < count_; ++i) {
    const int64_t t = token(i);
    if (t < 0 || t >= vocab)
      bad(path_, "token " + std::to_string(i) + " is " + std::to_string(t) + ", outside the model's vocabulary [0, " +
                     std::to_string(vocab) + ")");
  }
}

void TokenFile::check_prompts(int64_t len, int64_t vocab) const {
  if (row_length_ > 0 && len > row_length_)
    bad(path_, "rows of " + std::to_string(row_length_) + " tokens, shorter than a prompt of " + std::to_string(len));
  if (row_length_ == 0 && len > count_)
    bad(path_, std::to_string(count_) + " tokens, fewer than a prompt of " + std::to_string(len));
  check_vocab(vocab);
}

void TokenFile::prompt(int64_t i, int64_t len, int32_t* out) const {
  const int64_t start = row_length_ > 0 ? (i % (count_ / row_length_)) * row_length_ : (i % (count_ / len)) * len;
  for (int64_t k = 0; k < len; ++k) out[k] = static_cast<int32_t>(token(start + k));
}

void TokenFile::sequence(int64_t q, int64_t seq, int32_t* out) const {
  const int64_t start = row_length_ > 0 ? (q % (count_ / row_length_)) * row_length_ : (q % ((count_ - 1) / seq)) * seq;
  for (int64_t i = 0; i <= seq; ++i) out[i] = static_cast<int32_t>(token(start + i));
}

void TokenFile::batch(int64_t step, int64_t gbs, int64_t first, int64_t count, int64_t seq, int32_t* inputs,
                      int32_t* targets) const {
  std::vector<int32_t> row(static_cast<size_t>(seq + 1));
  for (int64_t i = 0; i < count; ++i) {
    sequence(step * gbs + first + i, seq, row.data());
    std::memcpy(inputs + i * seq, row.data(), static_cast<size_t>(seq) * 4);
    std::memcpy(targets + i * seq, row.data() + 1, static_cast<size_t>(seq) * 4);
  }
}

}  // namespace gpuledger
