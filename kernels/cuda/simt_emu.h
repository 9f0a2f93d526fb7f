// A CPU emulator of the CUDA execution model, for testing the SIMT kernels of
// kernels/cuda/ on a machine without a GPU. Host-only; used only when the
// kernel sources are compiled as C++ with GPL_SIMT_EMULATION=1 (tests/gpu:
// test_simt_emulated), never in the CUDA build.
//
// What it emulates: a launch runs its blocks one after another; the threads of
// a block are fibers (ucontext) on one OS thread, so a thread runs until it
// reaches __syncthreads(), a warp shuffle or its end, then the next one runs.
// __syncthreads() releases when every live thread of the block has reached it;
// a shuffle when every live lane of the warp has. Static and dynamic shared
// memory are plain host memory shared by the block's fibers; between barriers
// the threads run in order in even blocks and in reverse order in odd blocks, so
// a missing barrier between a write and a read of shared memory shows in one of
// them. What it does not emulate: concurrency between blocks (none of our
// kernels relies on it), atomics, finer memory-model races, timing. A barrier that cannot complete — a __syncthreads()
// that some threads of a block skip, a shuffle with a lane waiting at a block barrier, a shuffle reading an exited lane
// — aborts with a message: these are bugs a GPU would hang or misbehave on.
#pragma once
#include <cuda_runtime.h>  // dim3, uint3, cudaStream_t (host declarations only)
#include <ucontext.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

namespace gpl_emu {

class Machine {
 public:
  static Machine& get() {
    static Machine machine;
    return machine;
  }

  // Runs body() once per thread of every block of the grid (blocks in order).
  void launch(dim3 grid, dim3 block, size_t dynamic_smem_bytes, const std::function<void()>& body) {
    const int64_t threads = static_cast<int64_t>(block.x) * block.y * block.z;
    if (threads <= 0 || threads > 1024) fail("a block must have 1 to 1024 threads");
    if (running_) fail("a kernel launched another kernel");
    running_ = true;
    grid_ = grid;
    block_ = block;
    body_ = &body;
    smem_.assign(dynamic_smem_bytes + 16, 0xCD);  // not zero: a kernel must initialise what it reads
    fibers_.resize(static_cast<size_t>(threads));
    stacks_.resize(static_cast<size_t>(threads) * kStackBytes);
    int64_t linear = 0;
    for (unsigned z = 0; z < grid.z; ++z)
      for (unsigned y = 0; y < grid.y; ++y)
        for (unsigned x = 0; x < grid.x; ++x) {
          block_idx_ = uint3{x, y, z};
          run_block(threads, /*reverse=*/(linear++ % 2) == 1);
        }
    running_ = false;
  }

  uint3 thread_idx() const { return fibers_[current_].tid; }
  uint3 block_idx() const { return block_idx_; }
  dim3 block_dim() const { return block_; }
  dim3 grid_dim() const { return grid_; }
  // 16-byte aligned, as CUDA's dynamic shared memory is.
  void* dynamic_smem() {
    auto p = reinterpret_cast<uintptr_t>(smem_.data());
    return reinterpret_cast<void*>((p + 15) & ~uintptr_t{15});
  }

  void sync_threads() { block_on(State::kBlockBarrier); }

  // Lane (own lane ^ lane_mask) of the caller's warp sends its `v` (every live
  // lane calls). Lanes are numbered by the linear thread index, as on a GPU.
  template <class T>
  T shuffle_xor(T v, int lane_mask) {
    const int64_t src_lane = (current_ % 32) ^ lane_mask;
    static_assert(sizeof(T) <= sizeof(uint64_t), "shuffle of at most 8 bytes");
    Fiber& f = fibers_[current_];
    std::memcpy(&f.send, &v, sizeof(T));
    f.src = static_cast<int64_t>(current_ / 32 * 32 + src_lane);
    block_on(State::kWarpSync);
    T r;
    std::memcpy(&r, &fibers_[current_].recv, sizeof(T));
    return r;
  }

 private:
  enum class State { kReady, kBlockBarrier, kWarpSync, kDone };
  struct Fiber {
    ucontext_t ctx;
    State state = State::kReady;
    uint3 tid{0, 0, 0};
    uint64_t send = 0, recv = 0;
    int64_t src = 0;
  };
  static constexpr size_t kStackBytes = 64 * 1024;

  [[noreturn]] static void fail(const char* what) {
    std::fprintf(stderr, "simt emulator: %s\n", what);
    std::abort();
  }

  static void entry() {
    Machine& m = get();
    (*m.body_)();
    m.fibers_[m.current_].state = State::kDone;
    // returning resumes uc_link, the scheduler
  }

  void block_on(State s) {
    Fiber& f = fibers_[current_];
    f.state = s;
    swapcontext(&f.ctx, &scheduler_);
  }

  // Between two barriers the threads run one after another: in thread order in
  // even blocks, in reverse order in odd ones, so that a read of shared memory
  // that lacks a barrier after the write it needs sees stale data in one of the two.
  void run_block(int64_t n, bool reverse) {
    for (int64_t i = 0; i < n; ++i) {
      Fiber& f = fibers_[i];
      f.state = State::kReady;
      f.tid = uint3{static_cast<unsigned>(i % block_.x), static_cast<unsigned>(i / block_.x % block_.y),
                    static_cast<unsigned>(i / (static_cast<int64_t>(block_.x) * block_.y))};
      getcontext(&f.ctx);
      f.ctx.uc_stack.ss_sp = stacks_.data() + static_cast<size_t>(i) * kStackBytes;
      f.ctx.uc_stack.ss_size = kStackBytes;
      f.ctx.uc_link = &scheduler_;
      makecontext(&f.ctx, &Machine::entry, 0);
    }
    for (;;) {
      for (int64_t k = 0; k < n; ++k) {
        const int64_t i = reverse ? n - 1 - k : k;
        if (fibers_[i].state == State::kReady) {
          current_ = i;
          swapcontext(&scheduler_, &fibers_[i].ctx);
        }
      }
      // Every thread is now waiting or done: release what can be released.
      bool released = false;
      for (int64_t w0 = 0; w0 < n; w0 += 32) {
        const int64_t w1 = std::min(n, w0 + 32);
        int64_t waiting = 0, live = 0;
        for (int64_t i = w0; i < w1; ++i) {
          waiting += fibers_[i].state == State::kWarpSync;
          live += fibers_[i].state != State::kDone;
        }
        if (waiting == 0 || waiting != live) continue;
        for (int64_t i = w0; i < w1; ++i) {
          Fiber& f = fibers_[i];
          if (f.state != State::kWarpSync) continue;
          if (f.src < w0 || f.src >= w1 || fibers_[f.src].state != State::kWarpSync)
            fail("a shuffle reads a lane that is not taking part (exited, or outside the block)");
          f.recv = fibers_[f.src].send;
        }
        for (int64_t i = w0; i < w1; ++i)
          if (fibers_[i].state == State::kWarpSync) fibers_[i].state = State::kReady;
        released = true;
      }
      if (released) continue;
      int64_t at_barrier = 0, live = 0;
      for (int64_t i = 0; i < n; ++i) {
        at_barrier += fibers_[i].state == State::kBlockBarrier;
        live += fibers_[i].state != State::kDone;
      }
      if (live == 0) return;
      if (at_barrier != live)
        fail("deadlock: some threads wait at __syncthreads() while others wait at a warp shuffle");
      for (int64_t i = 0; i < n; ++i)
        if (fibers_[i].state == State::kBlockBarrier) fibers_[i].state = State::kReady;
    }
  }

  ucontext_t scheduler_{};
  std::vector<Fiber> fibers_;
  std::vector<char> stacks_;
  std::vector<unsigned char> smem_;
  int64_t current_ = 0;
  dim3 grid_, block_;
  uint3 block_idx_{0, 0, 0};
  const std::function<void()>* body_ = nullptr;
  bool running_ = false;
};

}  // namespace gpl_emu

// ---- the CUDA built-ins the kernels use ----
#define threadIdx (::gpl_emu::Machine::get().thread_idx())
#define blockIdx (::gpl_emu::Machine::get().block_idx())
#define blockDim (::gpl_emu::Machine::get().block_dim())
#define gridDim (::gpl_emu::Machine::get().grid_dim())

inline void __syncthreads() { ::gpl_emu::Machine::get().sync_threads(); }

template <class T>
inline T __shfl_xor_sync(unsigned /*mask: full warps only*/, T v, int lane_mask) {
  return ::gpl_emu::Machine::get().shuffle_xor(v, lane_mask);
}
