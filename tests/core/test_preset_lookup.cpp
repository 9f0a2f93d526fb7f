// Finding the preset folder: the environment override, then
// share/gpuledger/presets in the executable's folder or any folder above it
// (an install prefix, a build tree), and an error naming every place tried.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "core/model_config.h"

namespace gpuledger {
namespace {

namespace fs = std::filesystem;

// A scratch folder removed at the end of each test.
class PresetLookup : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("gpl_preset_lookup_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override {
    unsetenv("GPULEDGER_PRESETS");
    fs::remove_all(root_);
  }
  fs::path make_dir(const fs::path& rel) {
    fs::create_directories(root_ / rel);
    return root_ / rel;
  }
  fs::path root_;
};

TEST_F(PresetLookup, EnvironmentWins) {
  const fs::path env = make_dir("mine");
  make_dir("prefix/share/gpuledger/presets");
  const PresetSearch s = find_preset_dir(env.string(), (root_ / "prefix/bin/gpuledger").string());
  EXPECT_EQ(s.dir, env.string());
  ASSERT_EQ(s.looked.size(), 1u);
}

TEST_F(PresetLookup, EnvironmentNamingNoFolderIsNotFound) {
  make_dir("prefix/share/gpuledger/presets");
  const std::string env = (root_ / "absent").string();
  const PresetSearch s = find_preset_dir(env, (root_ / "prefix/bin/gpuledger").string());
  EXPECT_TRUE(s.dir.empty()) << "an explicit choice does not fall back to " << s.dir;
  ASSERT_EQ(s.looked.size(), 1u);
  EXPECT_NE(s.looked[0].find(env), std::string::npos);
  EXPECT_NE(s.looked[0].find("GPULEDGER_PRESETS"), std::string::npos);
}

TEST_F(PresetLookup, InstallPrefix) {
  const fs::path presets = make_dir("prefix/share/gpuledger/presets");
  const PresetSearch s = find_preset_dir("", (root_ / "prefix/bin/gpuledger").string());
  EXPECT_EQ(s.dir, presets.string());
  ASSERT_EQ(s.looked.size(), 2u);  // bin/share/..., then the prefix's
  EXPECT_EQ(s.looked[0], (root_ / "prefix/bin/share/gpuledger/presets").string());
}

TEST_F(PresetLookup, BuildTreeTestBinaryWalksUp) {
  const fs::path presets = make_dir("build/share/gpuledger/presets");
  const PresetSearch s = find_preset_dir("", (root_ / "build/tests/core/test_x").string());
  EXPECT_EQ(s.dir, presets.string());
  ASSERT_EQ(s.looked.size(), 3u);  // tests/core, tests, build
  EXPECT_EQ(s.looked[0], (root_ / "build/tests/core/share/gpuledger/presets").string());
  EXPECT_EQ(s.looked[1], (root_ / "build/tests/share/gpuledger/presets").string());
}

TEST_F(PresetLookup, NearestFolderWins) {
  const fs::path near = make_dir("build/tests/share/gpuledger/presets");
  make_dir("build/share/gpuledger/presets");
  EXPECT_EQ(find_preset_dir("", (root_ / "build/tests/core/test_x").string()).dir, near.string());
}

TEST_F(PresetLookup, NotFoundListsEveryFolderUpToTheRoot) {
  const PresetSearch s = find_preset_dir("", (root_ / "a/b/gpuledger").string());
  for (const auto& l : s.looked) EXPECT_NE(l.find("share/gpuledger/presets"), std::string::npos) << l;
  ASSERT_GE(s.looked.size(), 3u);
  EXPECT_EQ(s.looked.front(), (root_ / "a/b/share/gpuledger/presets").string());
  EXPECT_EQ(s.looked.back(), "/share/gpuledger/presets");
  EXPECT_EQ(s.dir.rfind(root_.string(), 0), std::string::npos) << s.dir;
}

TEST_F(PresetLookup, ErrorNamesWhereItLooked) {
  const std::string env = (root_ / "absent").string();
  ASSERT_EQ(setenv("GPULEDGER_PRESETS", env.c_str(), 1), 0);
  try {
    preset_dir();
    ADD_FAILURE() << "no ConfigError thrown";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(env), std::string::npos) << what;
    EXPECT_NE(what.find("GPULEDGER_PRESETS"), std::string::npos) << what;
  }
  // A preset by name needs the folder; a path to a file does not.
  EXPECT_THROW(load_model("llama3-8b"), ConfigError);
}

// This test binary lives in <build>/tests/core/: it finds the copy the build
// places in <build>/share/gpuledger/presets, with no source path compiled in.
TEST_F(PresetLookup, BuildTreeBinaryFindsTheBuildsCopy) {
  unsetenv("GPULEDGER_PRESETS");
  const fs::path dir = preset_dir();
  EXPECT_EQ(dir.filename(), "presets");
  EXPECT_EQ(dir.parent_path().filename(), "gpuledger");
  EXPECT_TRUE(fs::is_regular_file(dir / "llama3-8b.json")) << dir;
  EXPECT_EQ(load_model("llama3-8b").layers, 32);
}

}  // namespace
}  // namespace gpuledger
