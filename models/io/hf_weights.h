// A Hugging Face checkpoint's weights in gpuledger's parameter layout, and
// back (the names: hf_names.h).
//
// Reading: unit_values gives the values of one unit of a rank's layout
// (layout order, fp32), each local element read from the checkpoint element
// it stands for (param_layout.h global_row / col_begin): a tensor-parallel
// rank reads its rows (and, for a row-parallel tensor, its column block), a
// pipeline stage its own units, a ZeRO 3 rank one unit at a time — straight
// from the mapped file, so no rank reads or holds the whole model.
// Padded vocabulary rows are zero, as Params' initialisation makes them.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/model_config.h"
#include "models/io/checkpoint.h"
#include "models/io/safetensors.h"
#include "models/transformer/param_layout.h"

namespace gpuledger {

class CheckpointWeights {
 public:
  // Opens the checkpoint (a folder or a .safetensors file) for model `m`.
  CheckpointWeights(const std::string& path, const ModelConfig& m);

  // Every tensor of the model is present with its shape and a dtype read
  // (F32/BF16/F16), and no checkpoint tensor is left that the model does not
  // represent (buffers such as GPT-2's attn.bias masks aside). Reads headers only.
  // Throws ConfigError naming the tensor.
  void validate() const;

  // The values of `unit` (a unit of make_param_layout for some rank), fp32, layout order.
  std::vector<float> unit_values(const UnitLayout& unit) const;

  const Checkpoint& checkpoint() const { return ck_; }

 private:
  Checkpoint ck_;
  ModelConfig m_;
  std::string gpt_prefix_;  // "transformer." or ""
};

// The checkpoint tensors (transformers' names, fp32) of a whole model whose
// one-rank parameters are `values` (unit by unit, layout order, as
// Trainer::parameters_fp32 gives them at tp = pp = 1).
std::vector<SafetensorOut> hf_tensors(const ModelConfig& m, const std::vector<float>& values);

// Writes dir/model.safetensors and dir/config.json (the folder is created).
void save_hf_checkpoint(const std::string& dir, const ModelConfig& m, const std::vector<float>& values);

}  // namespace gpuledger
