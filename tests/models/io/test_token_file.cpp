// Token files (models/io/token_file.h): llm.c's format and .npy (int32,
// int64, uint16; 1-D and [n, seq + 1]) serve llm.c's inputs and next-token
// targets; bad files are ConfigErrors saying what is wrong.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "core/model_config.h"
#include "models/io/token_file.h"

namespace gpuledger {
namespace {

namespace fs = std::filesystem;

std::string scratch(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("gpuledger-tokens-" + std::to_string(::getpid())) / name;
  fs::create_directories(p.parent_path());
  return p.string();
}

template <typename T>
std::string write_llmc(const std::string& name, const std::vector<T>& tokens, int32_t magic = 20240520,
                       int32_t version = 1, int32_t count = -1) {
  const std::string p = scratch(name);
  int32_t header[256] = {};
  header[0] = magic;
  header[1] = version;
  header[2] = count >= 0 ? count : static_cast<int32_t>(tokens.size());
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(header), sizeof header);
  f.write(reinterpret_cast<const char*>(tokens.data()), static_cast<std::streamsize>(tokens.size() * sizeof(T)));
  return p;
}

template <typename T>
std::string write_npy(const std::string& name, const std::string& descr, const std::string& shape,
                      const std::vector<T>& v, const std::string& order = "False") {
  std::string h = "{'descr': '" + descr + "', 'fortran_order': " + order + ", 'shape': " + shape + ", }";
  h.append(63 - (10 + h.size()) % 64, ' ');
  h += '\n';
  const std::string p = scratch(name);
  std::ofstream f(p, std::ios::binary);
  f << "\x93NUMPY" << '\x01' << '\x00';
  const uint16_t n = static_cast<uint16_t>(h.size());
  f.write(reinterpret_cast<const char*>(&n), 2);
  f << h;
  f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
  return p;
}

std::vector<uint16_t> iota16(int n) {
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<uint16_t>(i);
  return v;
}

TEST(TokenFile, LlmcStreamServesOverlappingSequencesAsLlmcDoes) {
  const TokenFile f(write_llmc("s.bin", iota16(17)));  // 0 … 16: two sequences of 8 (+1)
  EXPECT_EQ(f.tokens(), 17);
  EXPECT_EQ(f.row_length(), 0);
  f.check_for(8, 17);
  std::vector<int32_t> in(16), tg(16);
  f.batch(0, 2, 0, 2, 8, in.data(), tg.data());
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(in[static_cast<size_t>(i)], i);  // row g = tokens [8g, 8g + 9)
    EXPECT_EQ(tg[static_cast<size_t>(i)], i + 1);
  }
  f.batch(1, 2, 1, 1, 8, in.data(), tg.data());  // sequence 3 wraps to sequence 1
  EXPECT_EQ(in[0], 8);
  EXPECT_EQ(tg[7], 16);
}

TEST(TokenFile, NpyRowsAndStreamsOfEveryIntegerType) {
  const std::vector<int32_t> rows = {5, 6, 7, 8, 1, 2, 3, 4};  // [2, 4]: seq 3
  const TokenFile a(write_npy("r.npy", "<i4", "(2, 4)", rows));
  EXPECT_EQ(a.row_length(), 4);
  a.check_for(3, 9);
  std::vector<int32_t> in(3), tg(3);
  a.batch(0, 2, 1, 1, 3, in.data(), tg.data());
  EXPECT_EQ(in, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(tg, (std::vector<int32_t>{2, 3, 4}));
  const TokenFile b(write_npy("s.npy", "<i8", "(5,)", std::vector<int64_t>{9, 8, 7, 6, 5}));
  b.batch(0, 1, 0, 1, 2, in.data(), tg.data());
  EXPECT_EQ(in[0], 9);
  EXPECT_EQ(in[1], 8);
  EXPECT_EQ(tg[1], 7);
  const TokenFile c(write_npy("u.npy", "<u2", "(4,)", iota16(4)));
  int32_t p[2];
  c.prompt(1, 2, p);
  EXPECT_EQ(p[0], 2);
  EXPECT_EQ(p[1], 3);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), "tokens");
    return e.what();
  }
  return "";
}

bool has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

TEST(TokenFile, BadFilesSayWhatIsWrong) {
  EXPECT_TRUE(has(error_of([] { TokenFile f(scratch("absent.bin")); }), "cannot open"));
  EXPECT_TRUE(has(error_of([] { TokenFile f(write_llmc("m.bin", iota16(4), 1234)); }), "magic 1234"));
  EXPECT_TRUE(has(error_of([] { TokenFile f(write_llmc("v.bin", iota16(4), 20240520, 7)); }), "version 7"));
  EXPECT_TRUE(has(error_of([] { TokenFile f(write_llmc("c.bin", iota16(4), 20240520, 1, 9)); }), "counts 9 tokens"));
  EXPECT_TRUE(has(error_of([] {
                    TokenFile f(write_npy("f.npy", "<f4", "(2,)", std::vector<float>{1, 2}));
                  }),
                  "dtype '<f4'"));
  EXPECT_TRUE(has(error_of([] {
                    TokenFile f(write_npy("o.npy", "<i4", "(2,)", std::vector<int32_t>{1, 2}, "True"));
                  }),
                  "Fortran order"));
  EXPECT_TRUE(has(error_of([] {
                    TokenFile f(write_npy("d.npy", "<i4", "(1, 1, 2)", std::vector<int32_t>{1, 2}));
                  }),
                  "3 dimensions"));
  EXPECT_TRUE(has(error_of([] {
                    TokenFile f(write_npy("n.npy", "<i4", "(3,)", std::vector<int32_t>{1, 2}));
                  }),
                  "needs 12 bytes"));
  const TokenFile rows(write_npy("r.npy", "<i4", "(1, 4)", std::vector<int32_t>{1, 2, 3, 40}));
  EXPECT_TRUE(has(error_of([&] { rows.check_for(4, 50); }), "--seq 4 needs rows of 5"));
  EXPECT_TRUE(has(error_of([&] { rows.check_for(3, 40); }), "token 3 is 40, outside the model's vocabulary [0, 40)"));
  const TokenFile stream(write_llmc("short.bin", iota16(4)));
  EXPECT_TRUE(has(error_of([&] { stream.check_for(4, 50); }), "fewer than one sequence"));
  EXPECT_TRUE(has(error_of([&] { stream.check_prompts(5, 50); }), "fewer than a prompt of 5"));
}

}  // namespace
}  // namespace gpuledger
