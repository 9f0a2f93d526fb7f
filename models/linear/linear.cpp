// The GEMMs of a linear layer (see linear.h).
#include "models/linear/linear.h"

#include "core/account.h"
#include "models/linear/fp8_scope.h"

namespace gpuledger {
namespace {

// The GEMM in FP8 (docs/formulas/fp8.md "CPU emulation"): A in format fa and
// B in fb, each cast with its per-tensor scale and held as fp32 (fp8 values
// times the inverse scale), multiplied and accumulated in fp32, written to C
// (C = A·B when beta is 0, C += A·B when beta is 1). A and B are dense (ld =
// their row length), as every Linear operand is.
void fp8_gemm(Device& dev, GemmArgs g, Fp8Format fa, Fp8Format fb) {
  const int64_t a_elems = g.m * g.k, b_elems = g.k * g.n, c_elems = g.m * g.n;
  Buffer a = dev.alloc(a_elems * 4, Account::kWorkspace, "fp8.a");
  Buffer b = dev.alloc(b_elems * 4, Account::kWorkspace, "fp8.b");
  dev.fp8_quantize_dequantize(a.as<float>(), g.a, g.ab_type, a_elems, fa);
  dev.fp8_quantize_dequantize(b.as<float>(), g.b, g.ab_type, b_elems, fb);
  g.a = a.data();
  g.b = b.data();
  g.ab_type = DType::kFP32;
  g.fp8 = true;
  if (g.c_type == DType::kFP32) {
    dev.gemm(g);
    return;
  }
  Buffer c = dev.alloc(c_elems * 4, Account::kWorkspace, "fp8.c");
  void* out = g.c;
  const DType out_t = g.c_type;
  const bool add = g.beta != 0.0f;
  g.c = c.data();
  g.c_type = DType::kFP32;
  g.beta = 0.0f;
  dev.gemm(g);
  if (add)
    dev.accumulate(out, out_t, c.data(), DType::kFP32, c_elems);
  else
    dev.convert(out, out_t, c.data(), DType::kFP32, c_elems);
}

// The Linear's GEMM: FP8 inside an Fp8GemmScope (the HYBRID format: E4M3 for
// inputs and weights, E5M2 for output gradients), else in the operands' dtype.
void run_gemm(Device& dev, const GemmArgs& g, Fp8Format fa, Fp8Format fb) {
  if (fp8_gemms_on())
    fp8_gemm(dev, g, fa, fb);
  else
    dev.gemm(g);
}

}  // namespace

void linear_forward(Device& dev, void* y, const void* x, const void* w, DType t, int64_t n, int64_t in, int64_t out) {
  GemmArgs g;
  g.trans_b = true;
  g.m = n;
  g.n = out;
  g.k = in;
  g.a = x;
  g.lda = in;
  g.b = w;
  g.ldb = in;
  g.ab_type = t;
  g.c = y;
  g.ldc = out;
  g.c_type = t;
  run_gemm(dev, g, Fp8Format::kE4M3, Fp8Format::kE4M3);  // x, W
}

void linear_backward_data(Device& dev, void* dx, const void* dy, const void* w, DType t, int64_t n, int64_t in,
                          int64_t out, float beta) {
  GemmArgs g;
  g.m = n;
  g.n = in;
  g.k = out;
  g.a = dy;
  g.lda = out;
  g.b = w;
  g.ldb = in;
  g.ab_type = t;
  g.c = dx;
  g.ldc = in;
  g.c_type = t;
  g.beta = beta;
  run_gemm(dev, g, Fp8Format::kE5M2, Fp8Format::kE4M3);  // dy, W
}

void linear_backward_weight(Device& dev, void* dw, DType gt, const void* dy, const void* x, DType t, int64_t n,
                            int64_t in, int64_t out) {
  GemmArgs g;
  g.trans_a = true;
  g.m = out;
  g.n = in;
  g.k = n;
  g.a = dy;
  g.lda = out;
  g.b = x;
  g.ldb = in;
  g.ab_type = t;
  g.ldc = in;
  if (gt == DType::kFP32 || gt == t) {  // the GEMM accumulates into the gradient directly
    g.c = dw;
    g.c_type = gt;
    g.beta = 1.0f;
    run_gemm(dev, g, Fp8Format::kE5M2, Fp8Format::kE4M3);  // dy, x
    return;
  }
  Buffer tmp = dev.alloc(out * in * 4, Account::kWorkspace, "dW.fp32");
  g.c = tmp.data();
  g.c_type = DType::kFP32;
  run_gemm(dev, g, Fp8Format::kE5M2, Fp8Format::kE4M3);  // dy, x
  dev.accumulate(dw, gt, tmp.data(), DType::kFP32, out * in);
}

}  // namespace gpuledger
