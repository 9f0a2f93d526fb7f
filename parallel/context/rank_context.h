// RankContext: who this rank is in the layout and the communicators of its
// groups, passed explicitly to the model and the training step (no globals;
// Megatron's ProcessGroupCollection idea). For one rank every group is a
// one-rank Comm.
// It sits in a folder of its own, below the training step's parts (the root
// files, pp/, dp/, zero/), so that every part can include it while the root
// only includes downward (docs/architecture.md "Dependencies between folders").
#pragma once
#include <cstdint>

#include "comm/comm.h"
#include "core/layout.h"
#include "models/transformer/unit_shard.h"

namespace gpuledger {

struct RankContext {
  Layout layout;
  int64_t rank = 0;           // in the world
  Coords coords;              // layout.coords(rank)
  Comm* tp = nullptr;         // tensor-parallel group
  Comm* dp = nullptr;         // data-parallel group (ZeRO shards over it); with cp > 1 the dp·cp ranks
  Comm* cp = nullptr;         // context-parallel ring (null or one rank: cp = 1)
  Comm* pp = nullptr;         // pipeline group (send/recv to stage ± 1)
  Comm* emb = nullptr;        // first + last stage when embeddings are tied and pp > 1; else null
  Comm* ep = nullptr;         // expert-parallel group (all_to_all of the MoE dispatch)
  Comm* expert_dp = nullptr;  // expert-data-parallel group: the ranks holding the same experts (dp when ep = 1)
  CommCounters* counters = nullptr;

  bool first_stage() const { return coords.pp == 0; }
  bool last_stage() const { return coords.pp == layout.pp - 1; }
  // The groups ZeRO shards a unit's parts over (models/transformer/unit_shard.h):
  // dp, and for the expert-sharded tensors the expert-data-parallel group.
  ShardGroups shard_groups() const {
    ShardGroups g{dp->size(), dp->rank(), 1, 0};
    if (expert_dp != nullptr) g = {dp->size(), dp->rank(), expert_dp->size(), expert_dp->rank()};
    return g;
  }
};

}  // namespace gpuledger
