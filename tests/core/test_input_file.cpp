// Input files (core/input_file.h): regular files only, stat first, a size cap,
// no control characters in names; each refusal a ConfigError saying why.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "core/input_file.h"
#include "core/model_config.h"

namespace gpuledger {
namespace {

std::string message_of(const std::string& path, int64_t cap) {
  try {
    read_input_file(path, cap, "model file");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

bool holds(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(InputFile, ReadsARegularFileWhole) {
  const std::string path = ::testing::TempDir() + "/input_file_ok.json";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  std::fputs("{\"a\": 1}\n", f);
  std::fclose(f);
  EXPECT_EQ(read_input_file(path, 9, "model file"), "{\"a\": 1}\n");  // exactly at the cap
  EXPECT_TRUE(holds(message_of(path, 8), "is 9 bytes, above the limit of 8"));
  std::remove(path.c_str());
}

TEST(InputFile, RefusesWhatIsNotARegularFile) {
  EXPECT_TRUE(holds(message_of(::testing::TempDir(), 1 << 20), "is a directory"));
  EXPECT_TRUE(holds(message_of("/dev/zero", 1 << 20), "is not a regular file"));
  const std::string fifo = ::testing::TempDir() + "/input_file_fifo";
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_TRUE(holds(message_of(fifo, 1 << 20), "is not a regular file"));  // refused without opening: no hang
  ::unlink(fifo.c_str());
  EXPECT_TRUE(holds(message_of(::testing::TempDir() + "/no-such-file.json", 1 << 20), "cannot open"));
}

TEST(InputFile, RefusesControlCharactersInNames) {
  EXPECT_TRUE(holds(message_of("model\x1b[31m.json", 1 << 20), "control character (byte 0x1b)"));
  EXPECT_NO_THROW(check_printable_name("model", "llama3.1-405b é"));
  EXPECT_THROW(check_printable_name("model", std::string("a\x7f")), ConfigError);
}

}  // namespace
}  // namespace gpuledger
