// PipelineExecutor (parallel/pp/pipeline_executor.h) alone, on both simulated
// stages of pp = 2: each stage books its two message buffers of b·s·h·e bytes
// in comm, sends and receives m messages of that size (the first stage
// activations out and gradients in, the last the reverse), and leaves no
// microbatch in flight.
#include "parallel/pp/pipeline_executor.h"

#include <gtest/gtest.h>

#include "part_rig.h"

namespace gpuledger {
namespace {

TEST(PipelineExecutor, EachStageBooksItsBuffersAndMessages) {
  const ModelConfig m = load_model("tiny-llama");
  const RunConfig r = testing::small_run();  // m = 2, b = 2, s = 16, fp32
  const int64_t msg = 4 * 2 * 16 * m.hidden;
  for (int64_t rank : {0, 1}) {
    testing::PartRig rig("meta", m, r, testing::layout_of(1, 1, 2), rank);
    const int64_t comm0 = rig.ledger.live(Account::kComm);
    PipelineExecutor pipe(*rig.dev, rig.ctx, m, r);
    EXPECT_EQ(rig.ledger.live(Account::kComm) - comm0, 2 * msg) << rank;
    pipe.run(*rig.stage, 0);
    EXPECT_EQ(rig.stage->in_flight(), 0);
    EXPECT_EQ(rig.count("send@pp").calls, 2) << rank;
    EXPECT_EQ(rig.count("send@pp").bytes, 2 * msg) << rank;
    EXPECT_EQ(rig.count("recv@pp").calls, 2) << rank;
    EXPECT_EQ(rig.count("recv@pp").bytes, 2 * msg) << rank;
  }
}

}  // namespace
}  // namespace gpuledger
