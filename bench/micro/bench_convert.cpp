// dtype conversion (Device::convert) between fp32 and each 16-bit type, both
// ways. Memory-bound: bytes from op_bytes.h.
// Name: convert/<backend>/<src>_to_<dst>/elems:n
#include "bench/micro/families.h"
#include "bench/micro/micro_context.h"
#include "kernels/op_bytes.h"

namespace gpuledger::micro {

namespace {

void run_convert(benchmark::State& st, Backend& b, DType src_t, DType dst_t) {
  guarded(st, [&] {
    const int64_t n = st.range(0);
    Device& dev = *b.dev;
    Buffer src = dev.alloc(n * dtype_bytes(src_t), Account::kWorkspace, "micro.convert.src");
    Buffer dst = dev.alloc(n * dtype_bytes(dst_t), Account::kWorkspace, "micro.convert.dst");
    fill_values(dev, src.data(), src_t, n);
    const double total_s = time_op(st, dev, [&] { dev.convert(dst.data(), dst_t, src.data(), src_t, n); });
    set_memory_counters(st, b, static_cast<double>(convert_bytes(n, src_t, dst_t)), total_s);
  });
}

}  // namespace

void register_convert(const MicroOptions& o) {
  for (const auto& name : o.backends) {
    Backend* b = backend(name);
    if (!b) continue;
    for (DType half : {DType::kBF16, DType::kFP16})
      for (bool to_half : {true, false}) {
        const DType src = to_half ? DType::kFP32 : half, dst = to_half ? half : DType::kFP32;
        const std::string rest = std::string(dtype_name(src)) + "_to_" + std::string(dtype_name(dst));
        auto* bm = benchmark::RegisterBenchmark(bench_name("convert", name, rest).c_str(),
                                                [b, src, dst](benchmark::State& st) { run_convert(st, *b, src, dst); });
        configure(bm)->ArgName("elems");
        for (int64_t n : o.convert_elems) bm->Arg(n);
      }
  }
}

}  // namespace gpuledger::micro
