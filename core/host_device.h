// GPL_HOST_DEVICE: marks a function shared by the CPU reference and the CUDA
// kernels (Philox, the attention tile rules, the KV codecs): __host__
// __device__ under nvcc, plain inline in C++ (the CPU backend, the SIMT
// emulator, host-side tests). One definition for every such header.
#pragma once

#if defined(__CUDACC__)
#define GPL_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define GPL_HOST_DEVICE inline
#endif
