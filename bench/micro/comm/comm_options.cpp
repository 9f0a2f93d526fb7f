// Parsing of gpl_micro_comm's flags (see comm_options.h).
#include "bench/micro/comm/comm_options.h"

#include <stdexcept>

#include "bench/micro/micro_options.h"

namespace gpuledger::micro {

std::string comm_options_help() {
  return "gpl_micro_comm flags (run under mpirun; rank 0 reports):\n"
         "  --gpl_min_bytes=8           smallest size (nccl-tests -b; K/M/G = 1024^n)\n"
         "  --gpl_max_bytes=1G          largest size (-e)\n"
         "  --gpl_factor=2              size multiplier (-f)\n"
         "  --gpl_iters=20              timed iterations per size (-n)\n"
         "  --gpl_warmup_iters=5        untimed iterations per size (-w)\n"
         "  --gpl_dtypes=fp32,bf16      payload dtypes\n"
         "  --gpl_backends=mpi,nccl     comm backends (nccl: CUDA + NCCL builds with a GPU per rank)\n"
         "  --gpl_kinds=all_reduce,all_gather,reduce_scatter,broadcast,send_recv\n"
         "  --gpl_placement=both|in_place|out_of_place\n";
}

CommOptions parse_comm_options(int* argc, char** argv) {
  CommOptions o;
  take_gpl_flags(argc, argv, [&](const std::string& name, const std::string& v) {
    if (name == "min_bytes") {
      o.min_bytes = parse_int_list(v, true).at(0);
    } else if (name == "max_bytes") {
      o.max_bytes = parse_int_list(v, true).at(0);
    } else if (name == "factor") {
      o.factor = parse_int_list(v, false).at(0);
    } else if (name == "iters") {
      o.iters = parse_int_list(v, false).at(0);
    } else if (name == "warmup_iters") {
      o.warmup_iters = std::stoll(v);
    } else if (name == "backends") {
      o.backends = split_commas(v);
    } else if (name == "kinds") {
      o.kinds = split_commas(v);
    } else if (name == "dtypes") {
      o.dtypes = parse_dtypes(v);
    } else if (name == "placement") {
      if (v != "both" && v != "in_place" && v != "out_of_place")
        throw std::invalid_argument("expected both, in_place or out_of_place");
      o.in_place = v != "out_of_place";
      o.out_of_place = v != "in_place";
    } else {
      return false;
    }
    return true;
  });
  if (o.factor < 2) throw std::invalid_argument("--gpl_factor must be >= 2");
  if (o.min_bytes > o.max_bytes) throw std::invalid_argument("--gpl_min_bytes is above --gpl_max_bytes");
  return o;
}

std::vector<int64_t> sweep_sizes(const CommOptions& o) {
  std::vector<int64_t> sizes;
  for (int64_t b = o.min_bytes; b <= o.max_bytes; b *= o.factor) sizes.push_back(b);
  return sizes;
}

}  // namespace gpuledger::micro
