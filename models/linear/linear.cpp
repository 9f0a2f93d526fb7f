// The GEMMs of a linear layer (see linear.h).
#include "models/linear/linear.h"

#include "core/account.h"
#include "models/linear/fp8_scope.h"

namespace gpuledger {
namespace {

// One operand of an FP8 GEMM: its format under the delayed recipe (the
// HYBRID format: E4M3 for inputs and weights, E5M2 for output gradients) and
// the blocks of its scales under the blockwise recipe, in the operand as
// stored (rows × cols): activations and gradients 1 × 128 along the GEMM's
// reduction (rowwise in the forward and the data gradient, columnwise — 128 ×
// 1 — in the weight gradient), weights 128 × 128 (docs/formulas/fp8.md).
struct Fp8Operand {
  Fp8Format delayed_format;
  int64_t block_rows, block_cols;
};
constexpr int64_t kB = kFp8BlockLen;
constexpr Fp8Operand kInputRowwise{Fp8Format::kE4M3, 1, kB}, kInputColumnwise{Fp8Format::kE4M3, kB, 1};
constexpr Fp8Operand kGradRowwise{Fp8Format::kE5M2, 1, kB}, kGradColumnwise{Fp8Format::kE5M2, kB, 1};
constexpr Fp8Operand kWeight{Fp8Format::kE4M3, kB, kB};

// An operand's FP8 image in fp32 (rows × cols as stored): one per-tensor scale
// (delayed; the emulation takes the current amax, docs/formulas/fp8.md §2), or
// one power-of-2 scale per block in E4M3 (blockwise: TE's Float8BlockScaling
// runs both passes in E4M3).
Buffer fp8_image(Device& dev, const void* x, DType t, int64_t rows, int64_t cols, Fp8Recipe recipe,
                 const Fp8Operand& op) {
  Buffer img = dev.alloc(rows * cols * 4, Account::kWorkspace, "fp8.operand");
  if (recipe == Fp8Recipe::kBlockwise)
    dev.fp8_quantize_dequantize_blocks(img.as<float>(), x, t, rows, cols, op.block_rows, op.block_cols,
                                       Fp8Format::kE4M3);
  else
    dev.fp8_quantize_dequantize(img.as<float>(), x, t, rows * cols, op.delayed_format);
  return img;
}

// The GEMM in FP8 (docs/formulas/fp8.md "CPU emulation"): A and B each cast
// to their FP8 image (held as fp32), multiplied and accumulated in fp32,
// written to C (C = A·B when beta is 0, C += A·B when beta is 1). A and B are
// dense (ld = their row length), as every Linear operand is.
void fp8_gemm(Device& dev, GemmArgs g, Fp8Recipe recipe, const Fp8Operand& fa, const Fp8Operand& fb) {
  const int64_t c_elems = g.m * g.n;
  Buffer a = g.trans_a ? fp8_image(dev, g.a, g.ab_type, g.k, g.m, recipe, fa)
                       : fp8_image(dev, g.a, g.ab_type, g.m, g.k, recipe, fa);
  Buffer b = g.trans_b ? fp8_image(dev, g.b, g.ab_type, g.n, g.k, recipe, fb)
                       : fp8_image(dev, g.b, g.ab_type, g.k, g.n, recipe, fb);
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

// The Linear's GEMM: FP8 inside an Fp8GemmScope of a recipe, else in the operands' dtype.
void run_gemm(Device& dev, const GemmArgs& g, const Fp8Operand& fa, const Fp8Operand& fb) {
  const Fp8Recipe recipe = fp8_gemm_recipe();
  if (recipe != Fp8Recipe::kNone)
    fp8_gemm(dev, g, recipe, fa, fb);
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
  run_gemm(dev, g, kInputRowwise, kWeight);  // x, W
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
  run_gemm(dev, g, kGradRowwise, kWeight);  // dy, W
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
    run_gemm(dev, g, kGradColumnwise, kInputColumnwise);  // dy, x
    return;
  }
  Buffer tmp = dev.alloc(out * in * 4, Account::kWorkspace, "dW.fp32");
  g.c = tmp.data();
  g.c_type = DType::kFP32;
  run_gemm(dev, g, kGradColumnwise, kInputColumnwise);  // dy, x
  dev.accumulate(dw, gt, tmp.data(), DType::kFP32, out * in);
}

}  // namespace gpuledger
