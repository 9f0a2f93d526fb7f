// One owner for the CPU's cores: the OpenMP pool.
//
// The CPU backend's loops run on OpenMP threads and its GEMMs on the BLAS. When
// both keep their own pools sized to the machine, they contend: libgomp's
// threads spin after every parallel region (OMP_WAIT_POLICY active by default)
// on the very cores OpenBLAS's threads need next, and a training step measured
// here ran 1.7× slower than with one owner (results/threads/README.md). So the
// OpenMP pool owns the cores: the BLAS is told to use one thread per call, and
// a large GEMM is split into column (or row) blocks across the OpenMP threads,
// each block one single-threaded BLAS call (ops_gemm.cpp).
//
// The pool's size is OpenMP's own (OMP_NUM_THREADS, else the cores in this
// process's affinity mask: under mpirun with binding, the rank's cores).
// GPULEDGER_THREAD_POLICY=none leaves both libraries' pools as they start (the
// contended arrangement, for comparisons); any other value but "openmp" is an error.
#pragma once

#include <string>

namespace gpuledger {

struct CpuThreadPolicy {
  bool applied = true;           // false under GPULEDGER_THREAD_POLICY=none
  int openmp_threads = 1;        // the pool that owns the cores
  int blas_threads = 1;          // threads the BLAS may start per call (1 under this policy)
  std::string describe() const;  // e.g. "OpenMP owns 2 threads; BLAS 1 thread per call, GEMMs split by OpenMP"
};

// Applies the policy once per process (idempotent, thread-safe) and returns it;
// throws std::invalid_argument for an unknown GPULEDGER_THREAD_POLICY.
const CpuThreadPolicy& apply_cpu_thread_policy();

}  // namespace gpuledger
