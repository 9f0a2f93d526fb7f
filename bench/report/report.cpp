// Report skeleton, config/environment sections, atomic writer (see report.h).
#include "bench/report/report.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "bench/report/fingerprint.h"
#include "core/dtype.h"

#ifndef GPULEDGER_GIT
#define GPULEDGER_GIT "unknown"
#endif

namespace gpuledger::report {

using nlohmann::json;

std::string host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

std::string git_commit() { return GPULEDGER_GIT; }

json make_report(std::string_view kind) {
  json r;
  r["schema"] = kSchema;
  r["kind"] = kind;
  r["status"] = "ok";
  r["tool"] = {{"version", GPULEDGER_VERSION}, {"git", git_commit()}};
  r["env"] = environment_json();  // host, hosts, when_utc, job_id, fingerprint (fingerprint.h)
  r["checks"] = json::array();
  return r;
}

json model_json(const ModelConfig& m) {
  json j = {{"name", m.name},         {"source", m.source},     {"flavour", m.is_gpt() ? "gpt" : "llama"},
            {"layers", m.layers},     {"hidden", m.hidden},     {"heads", m.heads},
            {"kv_heads", m.kv_heads}, {"head_dim", m.head_dim}, {"ffn", m.ffn},
            {"vocab", m.vocab},       {"max_seq", m.max_seq},   {"tied_embeddings", m.tied_embeddings},
            {"qkv_bias", m.qkv_bias}};
  j["sliding_window"] = m.sliding_window ? json(*m.sliding_window) : json(nullptr);
  return j;
}

json config_json(const ResolvedConfig& r) {
  const auto& l = r.layout;
  const auto& run = r.run;
  json c;
  c["model"] = model_json(r.model);
  c["layout"] = {{"dp", l.dp}, {"tp", l.tp}, {"pp", l.pp}, {"zero", l.zero}, {"sp", l.sp}, {"world", l.world()}};
  c["run"] = {{"seq", run.seq},
              {"mbs", run.mbs},
              {"microbatches", run.microbatches},
              {"gbs", run.global_batch(l.dp)},
              {"schedule", schedule_name(run.schedule)},
              {"recompute", recompute_name(run.recompute)},
              {"attention", attention_name(run.attention)},
              {"dtype", dtype_name(run.dtype)},
              {"grad_dtype", dtype_name(run.grad_dtype)},
              {"dropout", run.dropout},
              {"seed", run.seed},
              {"bucket_mb", run.bucket_mb},
              {"overlap_grad_reduce", run.overlap_grad_reduce},
              {"prefetch", run.prefetch}};
  if (r.device) c["device"] = r.device->name;
  if (r.device_memory_bytes) c["device_memory_bytes"] = *r.device_memory_bytes;
  return c;
}

void write_report(const json& doc, const std::string& path) {
  const std::string text = doc.dump(2) + "\n";
  if (path == "-") {
    std::cout << text << std::flush;
    return;
  }
  namespace fs = std::filesystem;
  const fs::path target(path);
  if (target.has_parent_path()) fs::create_directories(target.parent_path());
  const fs::path tmp = target.string() + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write report " + tmp.string());
    out << text;
    out.flush();
    if (!out) throw std::runtime_error("writing report " + tmp.string() + " failed");
  }
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp);
    throw std::runtime_error("cannot rename " + tmp.string() + " to " + path + ": " + ec.message());
  }
}

}  // namespace gpuledger::report
