// Trace slices (see trace.h).
#include "core/trace.h"

#include <chrono>
#include <utility>

namespace gpuledger {

double TraceRecorder::now_us() {
  using namespace std::chrono;
  return static_cast<double>(duration_cast<nanoseconds>(system_clock::now().time_since_epoch()).count()) * 1e-3;
}

void TraceRecorder::add(TraceSlice s) {
  if (static_cast<int64_t>(slices_.size()) >= max_slices_) {
    ++dropped_;
    return;
  }
  slices_.push_back(std::move(s));
}

}  // namespace gpuledger
