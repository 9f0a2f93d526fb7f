// The thread's FP8 switch (see fp8_scope.h): one flag per thread, so that
// simulated ranks on threads of their own do not see each other's scopes.
#include "models/linear/fp8_scope.h"

namespace gpuledger {
namespace {
thread_local bool fp8_on = false;
}  // namespace

Fp8GemmScope::Fp8GemmScope(bool on) : previous_(fp8_on) { fp8_on = on; }
Fp8GemmScope::~Fp8GemmScope() { fp8_on = previous_; }
bool fp8_gemms_on() { return fp8_on; }

}  // namespace gpuledger
