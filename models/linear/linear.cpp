// The GEMMs of a linear layer (see linear.h).
#include "models/linear/linear.h"

#include "core/account.h"

namespace gpuledger {

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
  dev.gemm(g);
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
  dev.gemm(g);
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
    dev.gemm(g);
    return;
  }
  Buffer tmp = dev.alloc(out * in * 4, Account::kWorkspace, "dW.fp32");
  g.c = tmp.data();
  g.c_type = DType::kFP32;
  dev.gemm(g);
  dev.accumulate(dw, gt, tmp.data(), DType::kFP32, out * in);
}

}  // namespace gpuledger
