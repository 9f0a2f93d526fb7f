// CublasLtGemm (see cublaslt_gemm.cuh): plan creation, the cache, the call.
#include "kernels/cuda/cublaslt_gemm.cuh"

#include <climits>
#include <string>

#include "kernels/cuda/cuda_check.h"

namespace gpuledger {
inline namespace cuda_backend {

struct CublasLtGemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;  // cuBLASLt's A (our B), B (our A), C
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (a) CUBLAS_CHECK_NOTHROW(cublasLtMatrixLayoutDestroy(a), "destroying a GEMM plan");
    if (b) CUBLAS_CHECK_NOTHROW(cublasLtMatrixLayoutDestroy(b), "destroying a GEMM plan");
    if (c) CUBLAS_CHECK_NOTHROW(cublasLtMatrixLayoutDestroy(c), "destroying a GEMM plan");
    if (desc) CUBLAS_CHECK_NOTHROW(cublasLtMatmulDescDestroy(desc), "destroying a GEMM plan");
  }
};

namespace {

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::kBF16: return CUDA_R_16BF;
    case DType::kFP16: return CUDA_R_16F;
    case DType::kFP32: return CUDA_R_32F;
  }
  return CUDA_R_32F;
}

// The largest power of two ≤ 256 dividing the address and, over a batch, the
// stride between matrices: what cuBLASLt may assume for every matrix of the batch.
int64_t alignment_bytes(const void* p, int64_t stride_bytes, int64_t batch) {
  int64_t a = 256;
  const auto addr = reinterpret_cast<uintptr_t>(p);
  while (a > 1 && (addr % static_cast<uintptr_t>(a) != 0 || (batch > 1 && stride_bytes % a != 0))) a /= 2;
  return a;
}

// A column-major layout of rows × cols (ld), batched with a stride (elements).
cublasLtMatrixLayout_t make_layout(DType t, int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t stride) {
  cublasLtMatrixLayout_t l = nullptr;
  CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&l, cuda_type(t), static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld),
      "creating a GEMM matrix layout");
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
                 "setting a GEMM batch count");
    CUBLAS_CHECK(
        cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride),
        "setting a GEMM batch stride");
  }
  return l;
}

std::string describe(const GemmArgs& g) {
  return "gemm m " + std::to_string(g.m) + " n " + std::to_string(g.n) + " k " + std::to_string(g.k) + " batch " +
         std::to_string(g.batch) + (g.trans_a ? " Aᵀ" : "") + (g.trans_b ? " Bᵀ" : "") + " " +
         std::string(dtype_name(g.ab_type)) + " -> " + std::string(dtype_name(g.c_type));
}

}  // namespace

CublasLtGemm::CublasLtGemm(Device& dev, int64_t workspace_bytes) {
  CUBLAS_CHECK(cublasLtCreate(&handle_), "creating the cuBLASLt handle");
  workspace_ = dev.alloc(workspace_bytes, Account::kWorkspace, "cublaslt.workspace");
}

CublasLtGemm::~CublasLtGemm() {
  plans_.clear();
  workspace_.reset();
  if (handle_) CUBLAS_CHECK_NOTHROW(cublasLtDestroy(handle_), "destroying the cuBLASLt handle");
}

CublasLtGemm::Plan& CublasLtGemm::plan_for(const GemmArgs& g) {
  const int64_t ab = dtype_bytes(g.ab_type), cb = dtype_bytes(g.c_type);
  const int64_t align_a = alignment_bytes(g.a, g.stride_a * ab, g.batch);
  const int64_t align_b = alignment_bytes(g.b, g.stride_b * ab, g.batch);
  const int64_t align_c = alignment_bytes(g.c, g.stride_c * cb, g.batch);
  // The key's fields in rows of four.
  // clang-format off
  const Key key = {g.trans_a,  g.trans_b,  g.m,        g.n,
                   g.k,        g.lda,      g.ldb,      g.ldc,
                   g.stride_a, g.stride_b, g.stride_c, g.batch,
                   static_cast<int64_t>(g.ab_type), static_cast<int64_t>(g.c_type),
                   align_a,    align_b,    align_c,    0};
  // clang-format on
  auto it = plans_.find(key);
  if (it != plans_.end()) return *it->second;

  if (g.batch > INT32_MAX) throw std::invalid_argument(describe(g) + ": batch exceeds cuBLASLt's int32 count");
  auto plan = std::make_unique<Plan>();
  const cublasComputeType_t compute = g.ab_type == DType::kFP32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->desc, compute, CUDA_R_32F), "creating a GEMM descriptor");
  // Column-major view (see the header): cuBLASLt computes Cᵀ (n × m) = op(B)ᵀ (n × k) · op(A)ᵀ (k × m).
  const cublasOperation_t op_first = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;   // on our B
  const cublasOperation_t op_second = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;  // on our A
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof op_first),
               "setting a GEMM transpose");
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof op_second),
               "setting a GEMM transpose");
  // Our B, row-major b_rows × b_cols, is column-major b_cols × b_rows.
  const int64_t b_rows = g.trans_b ? g.n : g.k, b_cols = g.trans_b ? g.k : g.n;
  const int64_t a_rows = g.trans_a ? g.k : g.m, a_cols = g.trans_a ? g.m : g.k;
  plan->a = make_layout(g.ab_type, b_cols, b_rows, g.ldb, g.batch, g.stride_b);
  plan->b = make_layout(g.ab_type, a_cols, a_rows, g.lda, g.batch, g.stride_a);
  plan->c = make_layout(g.c_type, g.n, g.m, g.ldc, g.batch, g.stride_c);

  cublasLtMatmulPreference_t pref = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref), "creating a GEMM preference");
  const uint64_t ws = static_cast<uint64_t>(workspace_.bytes());
  const uint32_t al_first = static_cast<uint32_t>(align_b), al_second = static_cast<uint32_t>(align_a),
                 al_c = static_cast<uint32_t>(align_c);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t st =
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_first,
                                              sizeof al_first);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_second,
                                              sizeof al_second);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulAlgoGetHeuristic(handle_, plan->desc, plan->a, plan->b, plan->c, plan->c, pref, 1, &result,
                                        &found);
  CUBLAS_CHECK_NOTHROW(cublasLtMatmulPreferenceDestroy(pref), "destroying a GEMM preference");
  CUBLAS_CHECK(st, "choosing an algorithm for " + describe(g));
  if (found == 0)
    throw std::runtime_error("cuBLASLt has no algorithm for " + describe(g) + " (alignments " +
                             std::to_string(align_a) + ", " + std::to_string(align_b) + ", " + std::to_string(align_c) +
                             " bytes)");
  plan->algo = result.algo;
  Plan& ref = *plan;
  plans_.emplace(key, std::move(plan));
  return ref;
}

void CublasLtGemm::run(const GemmArgs& g, cudaStream_t stream) {
  Plan& p = plan_for(g);
  CUBLAS_CHECK(cublasLtMatmul(handle_, p.desc, &g.alpha, g.b, p.a, g.a, p.b, &g.beta, g.c, p.c, g.c, p.c, &p.algo,
                              workspace_.data(), static_cast<size_t>(workspace_.bytes()), stream),
               "running " + describe(g));
}

}  // namespace cuda_backend
}  // namespace gpuledger
