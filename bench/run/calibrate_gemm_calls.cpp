// The GEMM calls of runs, timed one by one (see calibrate_gemm_calls.h).
#include "bench/run/calibrate_gemm_calls.h"

#include <fmt/format.h>

#include <chrono>
#include <map>

#include "bench/median.h"
#include "bench/peak.h"
#include "bench/run/predict_step.h"
#include "kernels/registry/registry.h"

namespace gpuledger::bench {
namespace {

// Collects the GEMM calls of the step (not of building the model), in order.
class GemmCallCollector : public StepProgramSink {
 public:
  explicit GemmCallCollector(std::vector<DTypedCall>& out) : out_(out) {}
  void set_recording(bool on) { recording_ = on; }
  void on_op(const OpCost& op) override {
    if (!recording_ || op.kind != OpCostKind::kGemm || op.m < 1 || op.n < 1 || op.k < 1 || op.batch < 1) return;
    out_.push_back(
        {op.dtype, perf::GemmCall{op.m, op.n, op.k, op.batch, op.trans_a, op.trans_b, op.c_dtype, op.accumulate}});
  }
  void on_comm(const CommCall&) override {}

 private:
  std::vector<DTypedCall>& out_;
  bool recording_ = false;
};

// A call laid out for timing: its operands, packed as the call reads them.
struct PreparedCall {
  Buffer a, b, c;
  GemmArgs g;
};

int64_t call_bytes(DType ab, const perf::GemmCall& c) {
  return c.batch * ((c.m * c.k + c.k * c.n) * dtype_bytes(ab) + c.m * c.n * dtype_bytes(c.c_dtype));
}

PreparedCall prepare(Device& dev, DType ab, const perf::GemmCall& call) {
  const int64_t eb = dtype_bytes(ab), cb = dtype_bytes(call.c_dtype);
  const int64_t a_elems = call.m * call.k, b_elems = call.k * call.n, c_elems = call.m * call.n;
  PreparedCall p{dev.alloc(call.batch * a_elems * eb, Account::kWorkspace, "calibrate.gemm.a"),
                 dev.alloc(call.batch * b_elems * eb, Account::kWorkspace, "calibrate.gemm.b"),
                 dev.alloc(call.batch * c_elems * cb, Account::kWorkspace, "calibrate.gemm.c"), GemmArgs{}};
  fill_values(dev, p.a, ab, call.batch * a_elems);
  fill_values(dev, p.b, ab, call.batch * b_elems);
  dev.fill_zero(p.c.data(), call.batch * c_elems * cb);
  GemmArgs& g = p.g;
  g.trans_a = call.trans_a;
  g.trans_b = call.trans_b;
  g.m = call.m;
  g.n = call.n;
  g.k = call.k;
  // op(A) is m×k, stored k×m when transposed; op(B) likewise.
  g.a = p.a.data();
  g.lda = call.trans_a ? call.m : call.k;
  g.stride_a = a_elems;
  g.b = p.b.data();
  g.ldb = call.trans_b ? call.k : call.n;
  g.stride_b = b_elems;
  g.ab_type = ab;
  g.c = p.c.data();
  g.ldc = call.n;
  g.stride_c = c_elems;
  g.c_type = call.c_dtype;
  g.batch = call.batch;
  g.beta = call.accumulate ? 1.0f : 0.0f;
  return p;
}

// The sequence replayed as the step makes it: every call with operands of its
// own, `warmup` passes, then `reps` passes in which each call is timed where it
// stands. A call finds the caches as the calls before it left them — its input
// often the previous call's output, a weight last read a layer or a pass ago —
// which neither back-to-back repetitions of one call nor a fixed eviction
// reproduce. Every occurrence of a call in every pass is one sample.
void time_sequence(Device& dev, const std::vector<DTypedCall>& seq, int warmup, int reps,
                   std::map<DTypedCall, std::vector<double>>& samples) {
  std::vector<PreparedCall> prepared;
  prepared.reserve(seq.size());
  for (const auto& [ab, call] : seq) prepared.push_back(prepare(dev, ab, call));
  for (int pass = 0; pass < warmup + reps; ++pass)
    for (size_t i = 0; i < seq.size(); ++i) {
      dev.synchronize();
      timing_barrier();
      const auto t0 = std::chrono::steady_clock::now();
      dev.gemm(prepared[i].g);
      dev.synchronize();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (pass >= warmup) samples[seq[i]].push_back(s);
    }
}

std::string describe(DType ab, const perf::GemmCall& c) {
  return fmt::format("{} m={} n={} k={} batch={} {}{} c={}{}", dtype_name(ab), c.m, c.n, c.k, c.batch,
                     c.trans_a ? "T" : "N", c.trans_b ? "T" : "N", dtype_name(c.c_dtype),
                     c.accumulate ? " accumulate" : "");
}

}  // namespace

std::vector<DTypedCall> run_gemm_calls(const ResolvedConfig& c) {
  std::vector<DTypedCall> calls;
  for (int64_t rank : run::pipeline_stage_ranks(c.layout)) {
    GemmCallCollector collector(calls);
    run::run_meta_step(c, rank, collector, [&](bool on) { collector.set_recording(on); });
  }
  return calls;
}

double measure_gemm_call(Device& dev, DType ab, const perf::GemmCall& call, int warmup, int reps) {
  PreparedCall p = prepare(dev, ab, call);
  return time_median_cold(dev, warmup, reps, [&] { dev.gemm(p.g); });
}

void calibrate_gemm_calls(perf::DeviceProfile& p, const std::vector<ResolvedConfig>& runs, int warmup, int reps,
                          std::ostream& progress) {
  if (runs.empty()) return;
  Ledger ledger;
  auto dev = make_device("cpu", ledger);
  std::map<DTypedCall, std::vector<double>> samples;
  int64_t replayed = 0, alone = 0;
  for (const auto& r : runs) {
    std::vector<DTypedCall> seq;
    int64_t bytes = 0;
    for (const auto& dc : run_gemm_calls(r)) {
      if (p.dtypes.count(dc.first) == 0) {
        progress << fmt::format("calibrate: gemm call {}: skipped (no {} in --dtypes)\n", describe(dc.first, dc.second),
                                dtype_name(dc.first));
        continue;
      }
      seq.push_back(dc);
      bytes += call_bytes(dc.first, dc.second);
    }
    if (bytes <= kSequenceMaxBytes) {
      time_sequence(*dev, seq, warmup, reps, samples);
      replayed += 1;
      continue;
    }
    // Too large to give every call operands of its own: each distinct call alone, caches evicted.
    alone += 1;
    for (const auto& dc : std::set<DTypedCall>(seq.begin(), seq.end()))
      if (samples.count(dc) == 0) samples[dc].push_back(measure_gemm_call(*dev, dc.first, dc.second, warmup, reps));
  }
  for (auto& [dc, t] : samples) {
    const double s = median(t);
    p.dtypes.at(dc.first).gemm_points.seconds[dc.second] = s;
    const auto& c = dc.second;
    progress << fmt::format("calibrate: gemm call {}: {:.3g} us, {:.3g} GFLOP/s ({} samples)\n", describe(dc.first, c),
                            s * 1e6, 2.0 * static_cast<double>(c.m * c.n * c.k * c.batch) / s / 1e9, t.size());
  }
  for (auto& [dtype, f] : p.dtypes)
    if (!f.gemm_points.seconds.empty())
      f.gemm_points.source = fmt::format(
          "measured by gpuledger calibrate --for: each GEMM call of the runs' steps (shape, batch, transposes, C's "
          "dtype, accumulate) on Device::gemm of the cpu backend ({}); a run's calls replayed in the step's order, "
          "each with operands of its own, {} passes after {} warm-up, the median of a call's samples (a run past "
          "{} MiB of operands: each call alone, caches evicted between repetitions)",
          dev->description(), reps, warmup, kSequenceMaxBytes >> 20);
  progress << fmt::format("calibrate: {} GEMM calls of {} runs measured ({} replayed in order, {} call by call)\n",
                          samples.size(), runs.size(), replayed, alone);
}

}  // namespace gpuledger::bench
