// CUDA_CHECK and CUBLAS_CHECK: the CUDA runtime's and cuBLAS(Lt)'s one-line
// wrappers on the shared check body (core/check.h, docs/architecture.md "Errors"). Each
// throws gpuledger::Error with the rank, host, the call, file:line, the
// library's message and a "while …" context; the _NOTHROW forms log instead
// (for destructors). Host-only: includes the runtime and cuBLASLt API headers
// (cuBLASLt's status type is cuBLAS's cublasStatus_t).
#pragma once
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "core/check.h"

#define CUDA_CHECK(expr, context) GPL_CHECK_GEN("CUDA", expr, cudaSuccess, cudaGetErrorString, context)
#define CUBLAS_CHECK(expr, context) \
  GPL_CHECK_GEN("cuBLAS", expr, CUBLAS_STATUS_SUCCESS, cublasLtGetStatusString, context)
#define CUDA_CHECK_NOTHROW(expr, context) GPL_CHECK_GEN_NOTHROW("CUDA", expr, cudaSuccess, cudaGetErrorString, context)
#define CUBLAS_CHECK_NOTHROW(expr, context) \
  GPL_CHECK_GEN_NOTHROW("cuBLAS", expr, CUBLAS_STATUS_SUCCESS, cublasLtGetStatusString, context)
