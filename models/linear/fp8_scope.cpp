// The thread's FP8 switch (see fp8_scope.h): one flag per thread, so that
// simulated ranks on threads of their own do not see each other's scopes.
#include "models/linear/fp8_scope.h"

namespace gpuledger {
namespace {
thread_local Fp8Recipe fp8_recipe = Fp8Recipe::kNone;
}  // namespace

Fp8GemmScope::Fp8GemmScope(Fp8Recipe recipe) : previous_(fp8_recipe) { fp8_recipe = recipe; }
Fp8GemmScope::~Fp8GemmScope() { fp8_recipe = previous_; }
Fp8Recipe fp8_gemm_recipe() { return fp8_recipe; }

}  // namespace gpuledger
