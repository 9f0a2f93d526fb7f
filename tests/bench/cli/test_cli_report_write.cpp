// Report writing (bench/report/report.h write_report and
// report_destination_problem): what is at the destination is respected — a
// symlink is followed, a FIFO written through, a failed write leaves no
// temporary file — and a destination that cannot work is named before a run.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "bench/report/report.h"

namespace gpuledger::report {
namespace {

namespace fs = std::filesystem;

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("report_write_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int temporaries_in(const fs::path& dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir))
    n += e.path().filename().string().find(".tmp.") != std::string::npos;
  return n;
}

const nlohmann::json kDoc = {{"schema", "gpuledger.report/1"}, {"kind", "test"}, {"n", 42}};
const std::string kText = kDoc.dump(2) + "\n";

TEST(ReportWrite, NewPathInNewFolders) {
  const fs::path dir = scratch("new");
  write_report(kDoc, (dir / "a" / "b" / "r.json").string());
  EXPECT_EQ(slurp(dir / "a" / "b" / "r.json"), kText);
  EXPECT_EQ(temporaries_in(dir / "a" / "b"), 0);
}

TEST(ReportWrite, SymlinkIsFollowedAndStays) {
  const fs::path dir = scratch("link");
  std::ofstream(dir / "target.json") << "old";
  fs::create_symlink(dir / "target.json", dir / "link.json");
  write_report(kDoc, (dir / "link.json").string());
  EXPECT_TRUE(fs::is_symlink(dir / "link.json"));
  EXPECT_EQ(slurp(dir / "target.json"), kText);
  fs::create_symlink("missing.json", dir / "dangling.json");  // relative, dangling: its target is created
  write_report(kDoc, (dir / "dangling.json").string());
  EXPECT_TRUE(fs::is_symlink(dir / "dangling.json"));
  EXPECT_EQ(slurp(dir / "missing.json"), kText);
  EXPECT_EQ(temporaries_in(dir), 0);
}

TEST(ReportWrite, FifoIsWrittenThrough) {
  const fs::path dir = scratch("fifo");
  const fs::path fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string received;
  std::thread reader([&] { received = slurp(fifo); });
  write_report(kDoc, fifo.string());
  reader.join();
  EXPECT_EQ(received, kText);
  struct stat st {};
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(temporaries_in(dir), 0);
}

TEST(ReportWrite, DeviceIsWrittenThroughAndAFullOneFails) {
  EXPECT_NO_THROW(write_report(kDoc, "/dev/null"));
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  if (::access("/dev/full", W_OK) == 0) {
    EXPECT_THROW(write_report(kDoc, "/dev/full"), std::runtime_error);
  }
}

TEST(ReportWrite, AFailedWriteLeavesNoTemporaryFile) {
  // A file-size limit below the report's size makes write(2) fail with EFBIG,
  // as a full disk fails it with ENOSPC: in a child, so the limit stays there.
  const fs::path dir = scratch("full");
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit lim{16, 16};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    try {
      write_report(kDoc, (dir / "r.json").string());
    } catch (const std::runtime_error&) {
      ::_exit(0);  // failed, as it must
    }
    ::_exit(1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the write did not fail";
  EXPECT_EQ(temporaries_in(dir), 0);
  EXPECT_FALSE(fs::exists(dir / "r.json"));
}

TEST(ReportWrite, DestinationIsCheckedBeforeARun) {
  const fs::path dir = scratch("dest");
  std::ofstream(dir / "file") << "x";
  EXPECT_EQ(report_destination_problem("-"), "");
  EXPECT_EQ(report_destination_problem("/dev/stdout"), "");
  EXPECT_EQ(report_destination_problem("/dev/null"), "");
  EXPECT_EQ(report_destination_problem((dir / "new" / "r.json").string()), "");
  EXPECT_EQ(report_destination_problem((dir / "file").string()), "");  // replaced
  EXPECT_EQ(report_destination_problem(dir.string()), "'" + dir.string() + "' is a directory");
  EXPECT_EQ(report_destination_problem((dir / "file" / "r.json").string()),
            "'" + (dir / "file").string() + "' is not a directory");
  EXPECT_EQ(report_destination_problem((dir / "a\x1b.json").string()), "the path holds a control character");
  EXPECT_EQ(report_destination_problem(""), "an empty path");
  EXPECT_EQ(output_dir_problem((dir / "file").string()), "'" + (dir / "file").string() + "' is not a directory");
  EXPECT_EQ(output_dir_problem((dir / "sweep" / "deeper").string()), "");
}

}  // namespace
}  // namespace gpuledger::report
