// The implementation's own parameter layout: which tensors a rank holds, in
// which flat buffer ("unit") and at which element offset, written from
// docs/exact-budget.md "Parameters held by a rank" (never from
// models/analytic, which counts the same tensors independently).
//
// Units, in forward order: "embedding" (first stage), "layer.<i>" (global
// layer index i, one per layer of the stage), "head" (last stage). Each unit
// is one flat buffer so ZeRO can shard it later. Within a unit the 2-D
// matrices come first, then the vectors (norm weights, biases): the large
// GEMM operands start the buffer (aligned as the allocation is), and the
// weight-decay set (matrices, Megatron's rule of no decay on biases and norms)
// is one prefix of the unit. A MoE layer's unit begins with its routed
// experts' matrices (the part ZeRO shards over the expert-data-parallel group
// under ep > 1, unit_shard.h).
//
// Multi-head latent attention (ModelConfig::is_mla(), docs/formulas/mla.md)
// replaces qkv with mla.q_down, mla.q_up (or mla.q when q_lora_rank = 0),
// mla.kv_down, mla.kv_up and the vectors mla.q_norm, mla.kv_norm; the up
// projections are column-parallel by heads (each a [nope | rope] or [k | v]
// pair of head blocks), attn_out row-parallel over a·v_head_dim columns, the
// down projections and norms whole on every rank (Megatron-LM's
// MLASelfAttention, docs/formulas/mla.md "Training").
//
// Tensor-parallel shapes (Megatron, Shoeybi et al. 2019): QKV and MLP-in
// (gate, up) are column-parallel (their output rows split by t), attention-out
// and MLP-out row-parallel (their input columns split by t); norm weights and
// row-parallel biases are replicated. Weights are stored as PyTorch's Linear
// does, (out × in), used as y = x·Wᵀ. The word embedding is vocab-parallel:
// rank j holds rows [j·V'/t, (j+1)·V'/t) of the padded V' × h matrix; rows
// >= V are padding (zero).
//
// Every tensor records how its local elements map into the full (t = 1)
// tensor, so initialisation can give a TP slice exactly the values of the
// one-rank model (global_element_index).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/layout.h"
#include "core/model_config.h"

namespace gpuledger {

enum class ParamInit {
  kNormal,          // N(0, 0.02²) (GPT-2, Radford et al. 2019)
  kResidualNormal,  // N(0, 0.02²) · 1/sqrt(2L): output projections into the residual (GPT-2 §2.3)
  kOnes,            // norm γ
  kZeros,           // norm β, biases
};

// How local rows map to rows of the full tensor.
enum class RowMap {
  kBlock,     // global row = row_begin + r (also the replicated case, row_begin = 0)
  kQkv,       // fused [q heads | k heads | v heads] rows of this rank (see global_row)
  kVocab,     // global row = row_begin + r; rows >= valid_rows_end are padding (zero)
  kHeadPair,  // two blocks split by heads, [first | second] (MLA's q_up, kv_up): the q_* and kv_* fields below
};

struct TensorSlot {
  std::string name;            // full name, e.g. "layers.3.qkv.weight"
  std::string role;            // name within its unit kind, e.g. "qkv.weight"
  int64_t offset = 0;          // elements from the start of the unit
  int64_t rows = 0, cols = 0;  // local shape; a vector is rows = n, cols = 1
  bool matrix = false;         // 2-D (weight decay applies)
  ParamInit init = ParamInit::kZeros;
  uint64_t tensor_id = 0;  // names the full tensor (the RNG stream of its init)

  // Placement in the full (t = 1) tensor of full_cols columns.
  int64_t full_cols = 0;
  int64_t col_begin = 0;  // column-split (row-parallel) tensors
  RowMap row_map = RowMap::kBlock;
  int64_t row_begin = 0;
  int64_t valid_rows_end = 0;  // kVocab: the unpadded V
  // kQkv: local rows [0, q_rows) are q rows q_row_begin + r; the next kv_rows
  // are k rows full_q_rows + kv_row_begin + r; the last kv_rows are v rows
  // full_q_rows + full_kv_rows + kv_row_begin + r. kHeadPair: the first two
  // of these, the first block then the second (of kv_rows rows).
  int64_t q_rows = 0, kv_rows = 0, q_row_begin = 0, kv_row_begin = 0;
  int64_t full_q_rows = 0, full_kv_rows = 0;

  // What the parallel training step needs to know of a tensor, said here
  // where the tensor is defined (docs/exact-budget.md "Parameters held by a
  // rank"):
  bool replicated_over_tp = false;           // every TP rank holds it whole: norm weights,
                                             // row-parallel biases, learned positions
  bool tp_partial_grad = false;              // replicated, and each TP rank's gradient is a
                                             // partial sum over the ranks' heads with or
                                             // without sp: MLA's down projections and latent
                                             // norms (mla_attention.h)
  bool word_embedding = false;               // the word embedding (first stage); with tied
                                             // embeddings and p = 1 the head reads it too
  bool tied_copy = false;                    // the last stage's copy of the tied word
                                             // embedding (p > 1): the same parameter
  bool summed_over_embedding_group = false;  // tied, p > 1: the word embedding and its
                                             // copy, whose gradients the first and last
                                             // stage sum (Megatron's embedding group)
  bool expert_sharded = false;               // ep > 1: the routed experts' matrices, E/ep
                                             // experts on the rank (rows of its block);
                                             // the gradient is summed over the
                                             // expert-data-parallel group, not dp

  int64_t elems() const { return rows * cols; }
};

// The row of the full tensor that local row r holds; nullopt for a padding row.
std::optional<int64_t> global_row(const TensorSlot& t, int64_t r);
// The element index in the full tensor of local element (r, c); nullopt for padding.
std::optional<int64_t> global_element_index(const TensorSlot& t, int64_t r, int64_t c);

struct UnitLayout {
  std::string name;                 // "embedding", "layer.<i>", "head"
  std::vector<TensorSlot> tensors;  // in buffer order
  int64_t elems = 0;                // Σ tensors (no padding between them)

  // The unit's runs of consecutive tensors of one weight-decay class, in
  // buffer order: matrices (decayed) and vectors (norms, biases: not). A unit
  // holds its matrices, then its vectors — but a MoE layer's experts come
  // first (the expert-sharded prefix, unit_shard.h), with gpt-oss's expert
  // biases among them: matrices, vectors, matrices, vectors.
  struct DecayRun {
    int64_t begin = 0, end = 0;
    bool decay = false;
  };
  std::vector<DecayRun> decay_runs() const;

  // The tensor with this role, or nullptr.
  const TensorSlot* find(std::string_view role) const;
  const TensorSlot& at(std::string_view role) const;  // throws std::out_of_range
  // The unit's word embedding or its tied copy, or nullptr.
  const TensorSlot* word_matrix() const;
  // Whether some tensor of the unit is summed over the embedding group.
  bool summed_over_embedding_group() const;
};

struct ParamLayout {
  std::vector<UnitLayout> units;  // forward order
  int embedding_unit = -1;        // index in units, -1 when not on this stage
  int first_layer_unit = -1;
  int head_unit = -1;
  int64_t first_layer = 0;           // global index of the stage's first layer (of chunk 0 under vpp)
  int64_t layers = 0;                // layers on the stage (all chunks)
  int64_t chunks = 1;                // model chunks (Layout::vpp), each chunk_layers layers, in unit order
  int64_t chunk_layers = 0;          // layers per chunk
  int64_t stage = 0, pp = 1;         // the stage and pipeline size the global layer indices follow
  int64_t vocab_padded = 0;          // V'
  int64_t vocab_rows = 0;            // V'/t rows of the word embedding / output on this rank
  bool head_uses_embedding = false;  // tied and pp == 1: the head reads embedding.word.weight

  int64_t total_elems() const;
  const UnitLayout& layer_unit(int64_t local_layer) const {
    return units[static_cast<size_t>(first_layer_unit + local_layer)];
  }
  // The global index of local layer i: chunk c = i / chunk_layers holds the
  // layers of virtual stage c·pp + stage (core/layout.h first_layer_of_chunk).
  int64_t global_layer(int64_t local_layer) const {
    if (chunks == 1) return first_layer + local_layer;
    const int64_t c = local_layer / chunk_layers;
    return (c * pp + stage) * chunk_layers + local_layer % chunk_layers;
  }
};

// V' = V if t = 1, else ⌈V / (128·t)⌉·128·t (Megatron's make-vocab-size-divisible-by 128 · t).
int64_t padded_vocab_size(int64_t vocab, int64_t tp);

// The layout of the rank at `coords` (its TP rank and pipeline stage matter).
ParamLayout make_param_layout(const ModelConfig& m, const Layout& l, const Coords& coords);

}  // namespace gpuledger
