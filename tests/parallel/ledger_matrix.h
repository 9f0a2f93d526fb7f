// Test helper (not a test binary): the matrix of training configurations
// the ledger tests run (flavour × recompute × attention × dtype × dropout ×
// shape × microbatches × schedule, plus other gradient dtypes), and one
// measurement per point — two steps on cpu, one on meta — cached per process.
#pragma once
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "trainer_rig.h"

namespace gpuledger::testing {

struct Point {
  std::string model;
  Recompute recompute;
  AttentionKind attention;
  DType dtype;
  double dropout;
  int64_t seq, mbs, microbatches;
  Schedule schedule;
  DType grad_dtype = DType::kBF16;  // fp32 anyway under --dtype fp32 (exact-budget.md, g)

  RunConfig run() const {
    RunConfig r;
    r.seq = seq;
    r.mbs = mbs;
    r.microbatches = microbatches;
    r.schedule = schedule;
    r.recompute = recompute;
    r.attention = attention;
    r.dtype = dtype;
    r.grad_dtype = grad_dtype;
    r.dropout = dropout;
    return r;
  }
  std::string name() const {
    std::string n = model + "_" + std::string(recompute_name(recompute)) + "_" +
                    std::string(attention_name(attention)) + "_" + std::string(dtype_name(dtype)) +
                    (dropout > 0 ? "_p01" : "_p0") + "_s" + std::to_string(seq) + "_b" + std::to_string(mbs) + "_m" +
                    std::to_string(microbatches) + "_" + std::string(schedule_name(schedule)) +
                    (grad_dtype != DType::kBF16 ? "_g" + std::string(dtype_name(grad_dtype)) : "");
    for (auto& c : n)
      if (c == '-') c = '_';
    return n;
  }
};

inline void PrintTo(const Point& p, std::ostream* os) { *os << p.name(); }

struct Measured {
  AccountBytes cpu_peak, meta_peak, cpu_live_after, meta_live_after;
  int64_t cpu_flops = 0, meta_flops = 0, cpu_flops_step2 = 0;
  AccountBytes cpu_peak_step2;
};

// One measurement per point, shared by the tests below (each costs two steps
// on the CPU and two on meta).
inline const Measured& measure(const Point& p) {
  static std::map<std::string, Measured> cache;
  auto it = cache.find(p.name());
  if (it != cache.end()) return it->second;
  const ModelConfig m = load_model(p.model);
  const RunConfig r = p.run();
  Measured out;
  {
    TrainerRig rig("cpu", m, r);
    out.cpu_flops = rig.trainer->step(0).executed_flops;
    out.cpu_peak = rig.ledger.peak_by_account();
    out.cpu_live_after = rig.ledger.live_by_account();
    out.cpu_flops_step2 = rig.trainer->step(1).executed_flops;
    out.cpu_peak_step2 = rig.ledger.peak_by_account();
  }
  {
    TrainerRig rig("meta", m, r);
    out.meta_flops = rig.trainer->step(0).executed_flops;
    out.meta_peak = rig.ledger.peak_by_account();
    out.meta_live_after = rig.ledger.live_by_account();
  }
  return cache.emplace(p.name(), out).first->second;
}

inline std::vector<Point> ledger_matrix() {
  std::vector<Point> pts;
  for (const char* model : {"tiny-gpt", "tiny-llama"})
    for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull})
      for (AttentionKind at : {AttentionKind::kMaterialized, AttentionKind::kFlash})
        for (DType dt : {DType::kBF16, DType::kFP32})
          for (double p : {0.0, 0.1})
            for (auto [seq, mbs] : {std::pair<int64_t, int64_t>{16, 2}, {48, 1}})
              for (int64_t m : {1, 3})
                for (Schedule sc : {Schedule::k1F1B, Schedule::kGPipe})
                  pts.push_back({model, rc, at, dt, p, seq, mbs, m, sc});
  // other gradient dtypes: Megatron's fp32 main grads, and fp16 weights with
  // bf16 gradients (the weight-gradient GEMM goes through fp32 workspace)
  for (const char* model : {"tiny-gpt", "tiny-llama"})
    for (Recompute rc : {Recompute::kNone, Recompute::kFull})
      for (auto [dt, gt] :
           {std::pair{DType::kBF16, DType::kFP32}, {DType::kFP16, DType::kBF16}, {DType::kFP16, DType::kFP16}})
        pts.push_back({model, rc, AttentionKind::kMaterialized, dt, 0.1, 16, 2, 2, Schedule::kGPipe, gt});
  return pts;
}

}  // namespace gpuledger::testing
