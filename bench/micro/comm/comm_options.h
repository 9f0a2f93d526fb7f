// gpl_micro_comm's --gpl_* flags: the size sweep (nccl-tests' -b, -e, -f),
// iterations (-n, -w), payload dtypes, comm backends, and placements.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace gpuledger::micro {

struct CommOptions {
  int64_t min_bytes = 8;                 // -b
  int64_t max_bytes = int64_t{1} << 30;  // -e
  int64_t factor = 2;                    // -f
  int64_t iters = 20;                    // -n: timed iterations per size
  int64_t warmup_iters = 5;              // -w
  std::vector<DType> dtypes = {DType::kFP32, DType::kBF16};
  std::vector<std::string> backends = {"mpi", "nccl"};  // nccl skipped when not built / no GPU
  std::vector<std::string> kinds = {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "send_recv"};
  bool in_place = true, out_of_place = true;
};

CommOptions parse_comm_options(int* argc, char** argv);
std::string comm_options_help();
// min_bytes, min_bytes·factor, … while <= max_bytes.
std::vector<int64_t> sweep_sizes(const CommOptions& o);

}  // namespace gpuledger::micro
