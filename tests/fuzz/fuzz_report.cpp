// libFuzzer target: reports as check, regress and sweep read them
// (bench/report/report_reader.h). The input is written to a file and read back
// through read_report_file, then walked with JsonView as a reader would: each
// member read as the type it holds, each array element visited. Any input
// either reads or throws ReportFormatError (a ConfigError naming the file and
// the JSON path); nothing else may escape, and no sanitizer may report.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "bench/report/report_reader.h"

namespace {

void walk(const gpuledger::report::JsonView& v, int depth) {
  if (depth > 64) return;
  if (v.is_object()) {
    for (const auto& [key, member] : v.members()) walk(member, depth + 1);
  } else if (v.is_array()) {
    for (const auto& e : v.elements()) walk(e, depth + 1);
  } else if (v.raw().is_number()) {
    (void)v.number();
    if (v.raw().is_number_integer()) (void)v.integer();
  } else if (v.raw().is_string()) {
    (void)v.string();
  } else if (v.raw().is_boolean()) {
    (void)v.boolean();
  }
}

const std::string& scratch_path() {
  static const std::string path = "/tmp/gpl-fuzz-report-" + std::to_string(::getpid()) + ".json";
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::FILE* f = std::fopen(scratch_path().c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    const gpuledger::report::ReportFile r = gpuledger::report::read_report_file(scratch_path());
    (void)r.kind();
    walk(r.root(), 0);
    // What check and regress read first: the ranks and their measured peaks.
    if (const auto ranks = r.root().find("ranks"))
      for (const auto& rank : ranks->elements())
        if (const auto measured = rank.find("measured")) (void)measured->number_or("peak_bytes", 0);
  } catch (const gpuledger::ConfigError&) {
  }
  return 0;
}
