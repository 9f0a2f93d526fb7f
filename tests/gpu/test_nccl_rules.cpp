// The NCCL comm's host-side rules, without a GPU (label unit): the dtype and
// reduction mappings, the aliasing classification of all_gather and
// reduce_scatter (nccl_rules.h), NCCL_CHECK's error (nccl_check.h) from a real
// NCCL call that fails the same way with or without a GPU, and the factory's
// refusals. The collectives themselves are tested on a GPU by test_nccl_comm.
#include <gtest/gtest.h>
#include <nccl.h>

#include <string>

#include "comm/comm_error.h"
#include "comm/make_nccl_comm.h"
#include "comm/nccl_check.h"
#include "comm/nccl_rules.h"
#include "core/check.h"
#include "kernels/device.h"
#include "kernels/ledger.h"
#include "kernels/registry/registry.h"

namespace gpuledger {
namespace {

TEST(NcclRules, DtypeMapping) {
  EXPECT_EQ(nccl_dtype(DType::kBF16), ncclBfloat16);
  EXPECT_EQ(nccl_dtype(DType::kFP16), ncclFloat16);
  EXPECT_EQ(nccl_dtype(DType::kFP32), ncclFloat32);
  // nccl.h's values (ncclDataType_t), so a reordering of either enum shows here.
  EXPECT_EQ(static_cast<int>(nccl_dtype(DType::kBF16)), 9);
  EXPECT_EQ(static_cast<int>(nccl_dtype(DType::kFP16)), 6);
  EXPECT_EQ(static_cast<int>(nccl_dtype(DType::kFP32)), 7);
}

TEST(NcclRules, ReduceOpMapping) {
  EXPECT_EQ(nccl_red_op(ReduceOp::kSum), ncclSum);
  EXPECT_EQ(nccl_red_op(ReduceOp::kMax), ncclMax);
}

// Addresses inside one array stand for device pointers: only their values matter.
// A group of 4, 8 bytes per rank: the gathered/scattered buffer is 32 bytes.
constexpr int64_t kN = 8, kSize = 4;
alignas(64) char space[256];
char* const out = space + 64;  // all_gather output / reduce_scatter input: [64, 96)

TEST(NcclRules, AllGatherInPlaceIsNcclsOnEveryRank) {
  for (int64_t r = 0; r < kSize; ++r)
    EXPECT_EQ(all_gather_aliasing(out, out + r * kN, kN, r, kSize), NcclAliasing::kInPlace) << r;
}

TEST(NcclRules, AllGatherOtherOverlapsAreStaged) {
  // in == out is in place on rank 0 only; on rank 2 it is slice 0, not its own.
  EXPECT_EQ(all_gather_aliasing(out, out, kN, 0, kSize), NcclAliasing::kInPlace);
  EXPECT_EQ(all_gather_aliasing(out, out, kN, 2, kSize), NcclAliasing::kStaged);
  EXPECT_EQ(all_gather_aliasing(out, out + 4, kN, 0, kSize), NcclAliasing::kStaged);   // straddles slices 0, 1
  EXPECT_EQ(all_gather_aliasing(out, out + 28, kN, 3, kSize), NcclAliasing::kStaged);  // last 4 bytes inside
  EXPECT_EQ(all_gather_aliasing(out, out - 4, kN, 0, kSize), NcclAliasing::kStaged);   // first 4 bytes inside
}

TEST(NcclRules, AllGatherDisjointBuffersAreDistinct) {
  EXPECT_EQ(all_gather_aliasing(out, out + 32, kN, 1, kSize), NcclAliasing::kDistinct);  // just past the end
  EXPECT_EQ(all_gather_aliasing(out, out - 8, kN, 1, kSize), NcclAliasing::kDistinct);   // just before
  EXPECT_EQ(all_gather_aliasing(out, space, kN, 1, kSize), NcclAliasing::kDistinct);
}

TEST(NcclRules, ReduceScatterInEqualsOutIsNcclsInPlaceOnRankZeroOnly) {
  char* const in = out;
  EXPECT_EQ(reduce_scatter_aliasing(in, in, kN, 0, kSize), NcclAliasing::kInPlace);
  for (int64_t r = 1; r < kSize; ++r)
    EXPECT_EQ(reduce_scatter_aliasing(in, in, kN, r, kSize), NcclAliasing::kStaged) << r;
}

TEST(NcclRules, ReduceScatterNcclInPlaceAndDisjoint) {
  char* const in = out;
  for (int64_t r = 0; r < kSize; ++r)
    EXPECT_EQ(reduce_scatter_aliasing(in + r * kN, in, kN, r, kSize), NcclAliasing::kInPlace) << r;
  EXPECT_EQ(reduce_scatter_aliasing(in + 32, in, kN, 1, kSize), NcclAliasing::kDistinct);
  EXPECT_EQ(reduce_scatter_aliasing(in - 8, in, kN, 1, kSize), NcclAliasing::kDistinct);
  EXPECT_EQ(reduce_scatter_aliasing(in + 30, in, kN, 1, kSize), NcclAliasing::kStaged);
  EXPECT_EQ(reduce_scatter_aliasing(in + 8, in, kN, 2, kSize), NcclAliasing::kStaged);  // rank 1's slot on rank 2
}

// ncclCommCount on a null communicator fails argument checking before NCCL
// touches a GPU, so it fails the same way here and on a GPU machine.
TEST(NcclCheck, ErrorNamesRankHostCallNcclsMessagesAndContext) {
  error_origin().rank = 3;
  error_origin().host = "node-a";
  int count = 0;
  try {
    NCCL_CHECK(ncclCommCount(nullptr, &count), "counting the ranks of 'tp'");
    FAIL() << "ncclCommCount(nullptr) succeeded";
  } catch (const CommError& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.library(), "NCCL");
    EXPECT_EQ(e.world_rank(), 3);
    EXPECT_EQ(e.host(), "node-a");
    EXPECT_EQ(e.call(), "ncclCommCount(nullptr, &count)");
    EXPECT_EQ(e.context(), "counting the ranks of 'tp'");
    // ncclGetErrorString's text for the code NCCL returned, and the code.
    EXPECT_NE(e.library_message().find(ncclGetErrorString(ncclInvalidArgument)), std::string::npos)
        << e.library_message();
    EXPECT_NE(e.library_message().find("(ncclResult_t 4)"), std::string::npos) << e.library_message();
    // NCCL's own line about it (2.28: "CommCount : comm argument is NULL").
    const std::string last = ncclGetLastError(nullptr);
    EXPECT_FALSE(last.empty());
    EXPECT_NE(e.library_message().find("NCCL's last error: " + last), std::string::npos) << e.library_message();
    for (const char* part : {"NCCL", "ncclCommCount(nullptr, &count)", "counting the ranks of 'tp'", "node-a"})
      EXPECT_NE(what.find(part), std::string::npos) << part << " not in: " << what;
  }
  error_origin() = ErrorOrigin{};
}

TEST(NcclCheck, AppendsNcclsLastErrorWhenItHasOne) {
  // Whatever NCCL last said (possibly nothing), the message carries it after the code's text.
  const std::string last = ncclGetLastError(nullptr);
  const std::string msg = detail::nccl_error_string(ncclSystemError);
  EXPECT_EQ(msg.rfind(std::string(ncclGetErrorString(ncclSystemError)) + " (ncclResult_t 2)", 0), 0u) << msg;
  if (last.empty())
    EXPECT_EQ(msg.find("last error"), std::string::npos) << msg;
  else
    EXPECT_NE(msg.find("NCCL's last error: " + last), std::string::npos) << msg;
}

TEST(NcclFactory, RefusesADeviceOtherThanCuda) {
  CommCounters counters;
  Ledger ledger;
  auto cpu = make_device("cpu", ledger);
  try {
    make_nccl_comm(nullptr, counters, *cpu);
    FAIL() << "make_nccl_comm accepted the cpu device";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "the NCCL comm needs the cuda backend's device, not 'cpu'");
  }
}

}  // namespace
}  // namespace gpuledger
