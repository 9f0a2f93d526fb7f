// CheckpointWeights, hf_tensors, save_hf_checkpoint (see hf_weights.h).
#include "models/io/hf_weights.h"

#include <filesystem>
#include <fstream>
#include <set>

#include "models/io/hf_config.h"
#include "models/io/hf_names.h"

namespace gpuledger {

namespace {

ParamLayout one_rank_layout(const ModelConfig& m) { return make_param_layout(m, Layout{}, Coords{}); }

// The shape a part has in the checkpoint: (rows × cols), (cols × rows) when
// transposed, (rows) for a vector.
std::vector<int64_t> part_shape(const HfPart& p, const TensorSlot& full) {
  if (full.cols == 1 && !full.matrix) return {p.rows};
  return p.transposed ? std::vector<int64_t>{full.full_cols, p.rows} : std::vector<int64_t>{p.rows, full.full_cols};
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Checkpoint tensors that are buffers, not parameters: GPT-2's causal masks
// (older files), Llama's rotary inv_freq (older files).
bool is_buffer(const std::string& name) {
  return name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias") || name.ends_with("rotary_emb.inv_freq");
}

}  // namespace

CheckpointWeights::CheckpointWeights(const std::string& path, const ModelConfig& m) : ck_(path), m_(m) {
  gpt_prefix_ = m.is_gpt() && !ck_.has("transformer.wte.weight") && ck_.has("wte.weight") ? "" : "transformer.";
}

void CheckpointWeights::validate() const {
  std::set<std::string> used;
  for (const UnitLayout& u : one_rank_layout(m_).units)
    for (const TensorSlot& t : u.tensors)
      for (const HfPart& p : hf_parts(m_, u.name, t, gpt_prefix_)) {
        if (!ck_.has(p.name))
          throw ConfigError("init_from",
                            ck_.path() + ": the checkpoint has no tensor " + p.name + " (the model's " + t.name + ")");
        const std::vector<int64_t> want = part_shape(p, t), got = ck_.info(p.name).shape;
        if (got != want)
          throw ConfigError("init_from", ck_.path() + ": tensor " + p.name + " has shape " + shape_text(got) +
                                             ", the model (config) needs " + shape_text(want));
        used.insert(p.name);
      }
  for (const std::string& name : ck_.names()) {
    // A tied model's file may carry lm_head.weight as well (the same values).
    if (used.count(name) || is_buffer(name) || (m_.tied_embeddings && name == "lm_head.weight")) continue;
    throw ConfigError("init_from", ck_.path() + ": tensor " + name + " is not part of the model as configured");
  }
}

std::vector<float> CheckpointWeights::unit_values(const UnitLayout& unit) const {
  std::vector<float> v(static_cast<size_t>(unit.elems), 0.0f);
  for (const TensorSlot& t : unit.tensors) {
    const std::vector<HfPart> parts = hf_parts(m_, unit.name, t, gpt_prefix_);
    for (int64_t r = 0; r < t.rows; ++r) {
      float* out = v.data() + t.offset + r * t.cols;
      const auto g = global_row(t, r);
      if (!g) continue;  // padded vocabulary row: zero
      const HfPart* p = nullptr;
      for (const HfPart& q : parts)
        if (*g >= q.first_row && *g < q.first_row + q.rows) p = &q;
      if (p == nullptr) throw std::logic_error("checkpoint: row " + std::to_string(*g) + " of " + t.name + " unmapped");
      const SafetensorsFile& f = ck_.file(p->name);
      const int64_t fr = *g - p->first_row;
      if (!p->transposed) {  // the row's column block, contiguous in the file
        f.read_fp32(p->name, fr * t.full_cols + t.col_begin, t.cols, out);
      } else {  // Conv1D (in × out): our row fr is the file's column fr
        for (int64_t c = 0; c < t.cols; ++c) f.read_fp32(p->name, (t.col_begin + c) * p->rows + fr, 1, out + c);
      }
    }
  }
  return v;
}

std::vector<SafetensorOut> hf_tensors(const ModelConfig& m, const std::vector<float>& values) {
  const ParamLayout pl = one_rank_layout(m);
  if (static_cast<int64_t>(values.size()) != pl.total_elems())
    throw std::invalid_argument("hf_tensors: " + std::to_string(values.size()) + " values for a model of " +
                                std::to_string(pl.total_elems()));
  std::vector<SafetensorOut> out;
  int64_t unit_begin = 0;
  for (const UnitLayout& u : pl.units) {
    for (const TensorSlot& t : u.tensors) {
      const float* src = values.data() + unit_begin + t.offset;  // (rows × cols), t = 1: the full tensor
      for (const HfPart& p : hf_parts(m, u.name, t)) {
        std::vector<float> part(static_cast<size_t>(p.rows * t.cols));
        for (int64_t r = 0; r < p.rows; ++r)
          for (int64_t c = 0; c < t.cols; ++c) {
            const float x = src[(p.first_row + r) * t.cols + c];
            part[static_cast<size_t>(p.transposed ? c * p.rows + r : r * t.cols + c)] = x;
          }
        out.push_back(fp32_tensor(p.name, part_shape(p, t), part.data()));
      }
    }
    unit_begin += u.elems;
  }
  return out;
}

void save_hf_checkpoint(const std::string& dir, const ModelConfig& m, const std::vector<float>& values) {
  std::filesystem::create_directories(dir);
  write_safetensors((std::filesystem::path(dir) / "model.safetensors").string(), hf_tensors(m, values),
                    {{"format", "pt"}});
  std::ofstream cfg(std::filesystem::path(dir) / "config.json");
  cfg << hf_config_json(m);
  if (!cfg.flush()) throw std::runtime_error("cannot write " + dir + "/config.json");
}

}  // namespace gpuledger
