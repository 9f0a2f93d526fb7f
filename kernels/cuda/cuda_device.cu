// CudaDevice (see cuda_device.cuh): construction, memory, copies, memory
// truth, the GEMM entry point, and make_cuda_device for the registry.
#include "kernels/cuda/cuda_device.cuh"

#include <cublasLt.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "core/local_rank.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/make_cuda_device.h"

namespace gpuledger {
inline namespace cuda_backend {

namespace {

// cuBLAS documentation ("cublasSetWorkspace"): 32 MiB recommended on Hopper, 4 MiB before.
int64_t cublaslt_workspace_bytes(int major) { return (major >= 9 ? 32 : 4) * int64_t{1} << 20; }

std::string version_string(int v) {  // 13000 -> "13.0"
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

}  // namespace

CudaDevice::CudaDevice(Ledger& ledger, int device_index) : SimtDevice(ledger), device_(device_index) {
  try {
    CUDA_CHECK(cudaSetDevice(device_), "selecting GPU " + std::to_string(device_));
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "creating the stream");
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device_), "reading the device properties");
    int smem_optin = 0, pools = 0, driver = 0, runtime = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device_),
               "reading the shared-memory limit");
    max_smem_per_block_bytes_ = smem_optin;
    CUDA_CHECK(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device_),
               "asking for memory-pool support");
    if (pools) {
      cudaMemPoolProps props{};
      props.allocType = cudaMemAllocationTypePinned;
      props.location.type = cudaMemLocationTypeDevice;
      props.location.id = device_;
      CUDA_CHECK(cudaMemPoolCreate(&pool_, &props), "creating the memory pool");
      uint64_t keep = UINT64_MAX;  // keep freed memory for reuse; memory_info() trims
      CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep),
                 "setting the pool's release threshold");
    }
    CUDA_CHECK(cudaDriverGetVersion(&driver), "reading the driver version");
    CUDA_CHECK(cudaRuntimeGetVersion(&runtime), "reading the runtime version");
    char mem[32];
    std::snprintf(mem, sizeof mem, "%.1f GiB", static_cast<double>(prop.totalGlobalMem) / (1u << 30));
    description_ = std::string("CUDA GPU ") + std::to_string(device_) + ": " + prop.name + " (sm_" +
                   std::to_string(prop.major) + std::to_string(prop.minor) + ", " +
                   std::to_string(prop.multiProcessorCount) + " SMs, " + mem + "), driver " + version_string(driver) +
                   ", runtime " + version_string(runtime) + ", cuBLASLt " + std::to_string(cublasLtGetVersion()) +
                   (pool_ ? ", stream-ordered pool" : ", cudaMalloc");
    gemm_ = std::make_unique<CublasLtGemm>(*this, cublaslt_workspace_bytes(prop.major));
  } catch (...) {
    release_resources();
    throw;
  }
}

CudaDevice::~CudaDevice() { release_resources(); }

void CudaDevice::release_resources() noexcept {
  gemm_.reset();  // frees the workspace through raw_free while the stream and pool live
  if (stream_) {
    CUDA_CHECK_NOTHROW(cudaStreamSynchronize(stream_), "synchronizing before teardown");
    CUDA_CHECK_NOTHROW(cudaStreamDestroy(stream_), "destroying the stream");
    stream_ = nullptr;
  }
  if (pool_) {
    CUDA_CHECK_NOTHROW(cudaMemPoolDestroy(pool_), "destroying the memory pool");
    pool_ = nullptr;
  }
}

// ---- memory ----

void* CudaDevice::raw_alloc(int64_t bytes) {
  const size_t size = static_cast<size_t>(std::max<int64_t>(bytes, 1));  // a distinct pointer even for 0 bytes
  void* p = nullptr;
  auto attempt = [&] { return pool_ ? cudaMallocFromPoolAsync(&p, size, pool_, stream_) : cudaMalloc(&p, size); };
  cudaError_t e = attempt();
  if (e == cudaErrorMemoryAllocation && pool_) {
    // Give the pool's unused memory back to the device and try once more:
    // a fragmented pool may hold enough in pieces that are too small.
    cudaGetLastError();
    CUDA_CHECK(cudaStreamSynchronize(stream_), "synchronizing after a failed allocation");
    CUDA_CHECK(cudaMemPoolTrimTo(pool_, 0), "trimming the memory pool");
    e = attempt();
  }
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: clear it; Device::alloc reports OutOfMemory
    return nullptr;
  }
  CUDA_CHECK(e, "allocating " + std::to_string(bytes) + " bytes");
  return p;
}

void CudaDevice::raw_free(void* p, int64_t bytes) {
  // Stream-ordered: kernels already queued that use p finish first.
  if (pool_)
    CUDA_CHECK_NOTHROW(cudaFreeAsync(p, stream_), "freeing " + std::to_string(bytes) + " bytes");
  else
    CUDA_CHECK_NOTHROW(cudaFree(p), "freeing " + std::to_string(bytes) + " bytes");
}

// Host memory held for the rank (Account::kHost): pinned, so that the copies
// to and from the device are DMA at full bandwidth and may run asynchronously.
void* CudaDevice::raw_alloc_host(int64_t bytes) {
  const size_t size = static_cast<size_t>(std::max<int64_t>(bytes, 1));
  void* p = nullptr;
  const cudaError_t e = cudaMallocHost(&p, size);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: clear it; Device::alloc reports OutOfMemory
    return nullptr;
  }
  CUDA_CHECK(e, "allocating " + std::to_string(bytes) + " bytes of pinned host memory");
  return p;
}

void CudaDevice::raw_free_host(void* p, int64_t bytes) {
  // cudaFreeHost waits for the device: no queued copy still reads p.
  CUDA_CHECK_NOTHROW(cudaFreeHost(p), "freeing " + std::to_string(bytes) + " bytes of pinned host memory");
}

MemoryInfo CudaDevice::memory_info() const {
  CUDA_CHECK(cudaStreamSynchronize(stream_), "synchronizing before reading memory");
  if (pool_) CUDA_CHECK(cudaMemPoolTrimTo(pool_, 0), "trimming the memory pool");
  size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes), "reading the device's memory");
  MemoryInfo m;
  m.free_bytes = static_cast<int64_t>(free_bytes);
  m.total_bytes = static_cast<int64_t>(total_bytes);
  return m;
}

void CudaDevice::copy_to_host(void* host_dst, const void* src, int64_t bytes) {
  if (bytes <= 0) return;
  CUDA_CHECK(cudaMemcpyAsync(host_dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, stream_),
             "copying " + std::to_string(bytes) + " bytes to the host");
  CUDA_CHECK(cudaStreamSynchronize(stream_), "waiting for a copy to the host");
}

void CudaDevice::copy_from_host(void* dst, const void* host_src, int64_t bytes) {
  if (bytes <= 0) return;
  // From pageable memory the call returns once the source has been staged, so
  // the caller may reuse it at once (CUDA runtime API, "API synchronization behavior").
  CUDA_CHECK(cudaMemcpyAsync(dst, host_src, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, stream_),
             "copying " + std::to_string(bytes) + " bytes to the device");
}

void CudaDevice::copy(void* dst, const void* src, int64_t bytes) {
  if (bytes <= 0 || dst == src) return;
  const auto d = reinterpret_cast<uintptr_t>(dst), s = reinterpret_cast<uintptr_t>(src);
  const auto n = static_cast<uintptr_t>(bytes);
  if (d < s + n && s < d + n) {  // overlapping (memmove semantics): through a temporary
    Buffer tmp = alloc(bytes, Account::kWorkspace, "copy.overlap");
    CUDA_CHECK(cudaMemcpyAsync(tmp.data(), src, n, cudaMemcpyDeviceToDevice, stream_), "copying on the device");
    CUDA_CHECK(cudaMemcpyAsync(dst, tmp.data(), n, cudaMemcpyDeviceToDevice, stream_), "copying on the device");
    return;
  }
  CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, stream_), "copying on the device");
}

void CudaDevice::fill_zero(void* dst, int64_t bytes) {
  if (bytes <= 0) return;
  CUDA_CHECK(cudaMemsetAsync(dst, 0, static_cast<size_t>(bytes), stream_), "zeroing device memory");
}

void CudaDevice::synchronize() { CUDA_CHECK(cudaStreamSynchronize(stream_), "synchronizing the stream"); }

// ---- GEMM ----

void CudaDevice::gemm_impl(const GemmArgs& g) {
  if (g.k == 0 || g.alpha == 0.0f)
    scale_matrices(g.c, g.c_type, g.m, g.n, g.ldc, g.stride_c, g.batch, g.beta);  // BLAS: A, B not read
  else
    gemm_->run(g, stream_);
}

}  // namespace cuda_backend

// ---- the registry's entry point ----

std::unique_ptr<Device> make_cuda_device(Ledger& ledger, int local_rank) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw std::invalid_argument(std::string("cuda: no GPU found (cudaGetDeviceCount: ") + cudaGetErrorString(e) + ")");
  }
  if (count <= 0) throw std::invalid_argument("cuda: no GPU found (cudaGetDeviceCount: 0 devices)");
  return std::make_unique<CudaDevice>(ledger, gpu_for_local_rank(local_rank, count));
}

void* cuda_device_stream(Device& device) {
  auto* cuda = dynamic_cast<CudaDevice*>(&device);
  return cuda ? static_cast<void*>(cuda->stream()) : nullptr;
}

}  // namespace gpuledger
