// Parsing of gpl_micro's --gpl_* flags (see micro_options.h).
#include "bench/micro/micro_options.h"

#include <stdexcept>

namespace gpuledger::micro {

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t end = text.find(',', begin);
    const std::string item = text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    if (!item.empty()) out.push_back(item);
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  return out;
}

std::vector<int64_t> parse_int_list(const std::string& text, bool binary_suffixes) {
  std::vector<int64_t> out;
  for (const auto& item : split_commas(text)) {
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(item, &used);
    } catch (const std::exception&) {
      throw std::invalid_argument("not a number: '" + item + "'");
    }
    const std::string suffix = item.substr(used);
    const double k = binary_suffixes ? 1024.0 : 1000.0;
    if (suffix == "K" || suffix == "k")
      v *= k;
    else if (suffix == "M" || suffix == "m")
      v *= k * k;
    else if (suffix == "G" || suffix == "g")
      v *= k * k * k;
    else if (!suffix.empty())
      throw std::invalid_argument("unknown suffix in '" + item + "'");
    if (v < 1) throw std::invalid_argument("sizes must be >= 1: '" + item + "'");
    out.push_back(static_cast<int64_t>(v));
  }
  if (out.empty()) throw std::invalid_argument("empty list: '" + text + "'");
  return out;
}

namespace {

std::vector<PresetAtTp> parse_presets(const std::string& text) {
  std::vector<PresetAtTp> out;
  for (const auto& item : split_commas(text)) {
    PresetAtTp p;
    const size_t colon = item.find(":tp");
    p.preset = item.substr(0, colon);
    if (colon != std::string::npos) p.tp = std::stoll(item.substr(colon + 3));
    if (p.tp < 1) throw std::invalid_argument("tp must be >= 1 in '" + item + "'");
    out.push_back(p);
  }
  return out;
}

}  // namespace

std::vector<DType> parse_dtypes(const std::string& text) {
  std::vector<DType> out;
  for (const auto& item : split_commas(text)) {
    const auto t = dtype_from_name(item);
    if (!t) throw std::invalid_argument("unknown dtype '" + item + "' (fp32, bf16, fp16)");
    out.push_back(*t);
  }
  return out;
}

std::string micro_options_help() {
  return "gpl_micro flags (before or among Google Benchmark's):\n"
         "  --gpl_backends=cpu,cuda          backends (cuda skipped when not built or no GPU)\n"
         "  --gpl_presets=gpt2,llama3-8b,llama3-70b:tp8   layer shapes (preset[:tpN])\n"
         "  --gpl_seqs=1024,2048,4096,8192   sequence lengths (tokens)\n"
         "  --gpl_mbs=1                      sequences per microbatch\n"
         "  --gpl_dtypes=fp32,bf16           storage dtypes (compute is fp32)\n"
         "  --gpl_adamw_params=1M,10M,100M   AdamW sizes (parameters)\n"
         "  --gpl_kv_contexts=1024,4096      KV tokens held per sequence\n"
         "  --gpl_kv_batch=8                 sequences per cached-attention call\n"
         "  --gpl_convert_elems=1M,16M       dtype-conversion sizes (elements, binary)\n"
         "  --gpl_peak=measure|none|<device preset>   what pct_of_peak is taken against\n";
}

void take_gpl_flags(int* argc, char** argv,
                    const std::function<bool(const std::string& name, const std::string& value)>& set) {
  int kept = 1;
  for (int i = 1; i < *argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--gpl_", 0) != 0) {
      argv[kept++] = argv[i];
      continue;
    }
    const size_t eq = arg.find('=');
    try {
      if (eq == std::string::npos || eq + 1 == arg.size()) throw std::invalid_argument("expected --gpl_NAME=VALUE");
      if (!set(arg.substr(6, eq - 6), arg.substr(eq + 1))) throw std::invalid_argument("unknown flag");
    } catch (const std::exception& e) {
      throw std::invalid_argument(arg + ": " + e.what());
    }
  }
  *argc = kept;
  argv[kept] = nullptr;
}

MicroOptions parse_micro_options(int* argc, char** argv) {
  MicroOptions o;
  take_gpl_flags(argc, argv, [&](const std::string& name, const std::string& v) {
    if (name == "backends")
      o.backends = split_commas(v);
    else if (name == "presets")
      o.presets = parse_presets(v);
    else if (name == "seqs")
      o.seqs = parse_int_list(v, false);
    else if (name == "mbs")
      o.mbs = parse_int_list(v, false).at(0);
    else if (name == "dtypes")
      o.dtypes = parse_dtypes(v);
    else if (name == "adamw_params")
      o.adamw_params = parse_int_list(v, false);
    else if (name == "kv_contexts")
      o.kv_contexts = parse_int_list(v, false);
    else if (name == "kv_batch")
      o.kv_batch = parse_int_list(v, false).at(0);
    else if (name == "convert_elems")
      o.convert_elems = parse_int_list(v, true);
    else if (name == "peak")
      o.peak = v;
    else
      return false;
    return true;
  });
  return o;
}

}  // namespace gpuledger::micro
