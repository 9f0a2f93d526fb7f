// What gpl_micro registers and what it measures against, read from its own
// --gpl_* flags before Google Benchmark reads the rest of the command line.
// Registration depends on these (backends, presets, sequence lengths), so they
// cannot be Google Benchmark arguments themselves.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace gpuledger::micro {

// One layer geometry: a model preset at a tensor-parallel degree.
struct PresetAtTp {
  std::string preset;  // "llama3-70b"
  int64_t tp = 1;      // written "llama3-70b:tp8"
};

struct MicroOptions {
  std::vector<std::string> backends = {"cpu", "cuda"};  // cuda skipped when not built / no GPU
  std::vector<PresetAtTp> presets = {{"gpt2", 1}, {"llama3-8b", 1}, {"llama3-70b", 8}};
  std::vector<int64_t> seqs = {1024, 2048, 4096, 8192};
  std::vector<DType> dtypes = {DType::kFP32, DType::kBF16};
  int64_t mbs = 1;  // sequences per microbatch (B)
  std::vector<int64_t> adamw_params = {1000000, 10000000, 100000000};
  std::vector<int64_t> kv_contexts = {1024, 4096};  // tokens held per sequence
  int64_t kv_batch = 8;                             // sequences decoded together
  std::vector<int64_t> convert_elems = {1 << 20, 1 << 24};
  // "measure" (the backend's own sgemm and STREAM-add peaks, as `gpuledger peak`),
  // "none" (pct counters left out), or a device preset name (datasheet figures).
  std::string peak = "measure";
};

// Removes the --gpl_* flags it understands from argv (so that Google
// Benchmark never sees them); throws std::invalid_argument on a bad value.
MicroOptions parse_micro_options(int* argc, char** argv);
// One line per flag, for --help.
std::string micro_options_help();

// "1024,2048" -> {1024, 2048}; accepts K/M/G suffixes (powers of 1024 for
// byte sizes, of 1000 otherwise).
std::vector<int64_t> parse_int_list(const std::string& text, bool binary_suffixes);
std::vector<std::string> split_commas(const std::string& text);
// "fp32,bf16" -> {kFP32, kBF16}; an unknown name throws.
std::vector<DType> parse_dtypes(const std::string& text);

// Takes the --gpl_NAME=VALUE arguments out of argv, leaving the others (for
// Google Benchmark) and updating *argc: set(NAME, VALUE) applies one and
// returns false for a NAME it does not know. Errors name the argument.
void take_gpl_flags(int* argc, char** argv,
                    const std::function<bool(const std::string& name, const std::string& value)>& set);

}  // namespace gpuledger::micro
