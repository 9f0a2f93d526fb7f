// Report skeleton, config/environment sections, atomic writer (see report.h).
#include "bench/report/report.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <stdexcept>

#include "bench/report/fingerprint.h"
#include "core/attention_pattern.h"
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

json optional_json(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

json model_json(const ModelConfig& m) {
  json j = {{"name", m.name},         {"source", m.source},     {"flavour", m.is_gpt() ? "gpt" : "llama"},
            {"layers", m.layers},     {"hidden", m.hidden},     {"heads", m.heads},
            {"kv_heads", m.kv_heads}, {"head_dim", m.head_dim}, {"ffn", m.ffn},
            {"vocab", m.vocab},       {"max_seq", m.max_seq},   {"tied_embeddings", m.tied_embeddings},
            {"qkv_bias", m.qkv_bias}};
  j["sliding_window"] = m.sliding_window ? json(*m.sliding_window) : json(nullptr);
  if (!m.attention_pattern.empty()) j["attention_pattern"] = attention_pattern_json(m);
  // Written only when set, so a dense model's report is unchanged.
  if (m.qk_norm) j["qk_norm"] = true;
  if (m.post_norms) j["post_norms"] = true;
  if (m.attn_out_bias) j["attn_out_bias"] = true;
  if (m.attention_sinks) j["attention_sinks"] = true;
  if (m.is_moe()) {
    j["num_experts"] = m.num_experts;
    j["experts_per_token"] = m.experts_per_token;
    j["expert_ffn"] = m.expert_ffn;
    j["shared_experts"] = m.shared_experts;
    j["shared_expert_ffn"] = m.shared_expert_ffn;
    j["norm_topk_prob"] = m.norm_topk_prob;
    j["router_aux_loss_coef"] = m.router_aux_loss_coef;
    j["capacity_factor"] = m.capacity_factor ? json(*m.capacity_factor) : json(nullptr);
    if (m.dense_layers > 0) j["dense_layers"] = m.dense_layers;
    if (m.router_bias) j["router_bias"] = true;
    if (m.router_logit_bias) j["router_logit_bias"] = true;
    if (m.expert_biases) j["expert_biases"] = true;
    if (m.swiglu_limit) j["swiglu_limit"] = *m.swiglu_limit;
    if (m.router_sigmoid) j["score_function"] = "sigmoid";
    if (m.routed_scaling_factor != 1.0) j["routed_scaling_factor"] = m.routed_scaling_factor;
  }
  if (m.is_mla()) {
    j["q_lora_rank"] = m.q_lora_rank;
    j["kv_lora_rank"] = m.kv_lora_rank;
    j["qk_nope_head_dim"] = m.qk_nope_head_dim;
    j["qk_rope_head_dim"] = m.qk_rope_head_dim;
    j["v_head_dim"] = m.v_head_dim;
  }
  if (m.mtp_modules > 0) j["mtp_modules"] = m.mtp_modules;
  return j;
}

json config_json(const ResolvedConfig& r) {
  const auto& l = r.layout;
  const auto& run = r.run;
  json c;
  c["model"] = model_json(r.model);
  c["layout"] = {{"dp", l.dp}, {"tp", l.tp}, {"pp", l.pp}, {"zero", l.zero}, {"sp", l.sp}, {"world", l.world()}};
  if (l.vpp > 1) c["layout"]["vpp"] = l.vpp;  // written only when interleaved: reports of vpp 1 stay as they were
  if (l.cp > 1) c["layout"]["cp"] = l.cp;     // written only with context parallelism, likewise
  if (l.ep > 1) c["layout"]["ep"] = l.ep;     // written only with expert parallelism, likewise
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
              {"prefetch", run.prefetch},
              {"optimizer", optimizer_name(run.optimizer)}};
  // SGD's momentum decides whether it keeps a state (0: none); `check` re-derives the budget from it.
  if (run.optimizer == OptimizerKind::kSGD) c["run"]["momentum"] = run.momentum;
  // Written only when on, so that reports without offload keep their form.
  if (run.offload_optimizer) c["run"]["offload"] = "optimizer";
  // Written only for an fp8 run (dtype then names the bf16 weights and activations).
  if (run.fp8_training())
    c["run"]["fp8"] = {{"recipe", fp8_recipe_name(run.fp8)}, {"amax_history_len", run.fp8_amax_history_len}};
  if (r.device) c["device"] = r.device->name;
  if (r.device_memory_bytes) c["device_memory_bytes"] = *r.device_memory_bytes;
  return c;
}

namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail_errno(const std::string& what) { throw std::runtime_error(what + ": " + std::strerror(errno)); }

// Writes all of `text` to `fd`, through short writes and EINTR.
void write_all(int fd, const std::string& text, const std::string& where) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail_errno("writing report " + where);
    done += static_cast<size_t>(n);
  }
}

// A device, FIFO or socket: written through, never replaced.
void write_through(const std::string& path, mode_t mode, const std::string& text) {
  int fd = -1;
  if (S_ISSOCK(mode)) {
    fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) fail_errno("report " + path + ": socket");
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof(addr.sun_path)) {
      ::close(fd);
      throw std::runtime_error("report " + path + ": socket path too long");
    }
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
      const int err = errno;
      ::close(fd);
      errno = err;
      fail_errno("report " + path + ": cannot connect to the socket");
    }
  } else {
    fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) fail_errno("cannot open report " + path);
  }
  try {
    write_all(fd, text, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
}

// A regular file (or none yet): a temporary file beside it, then rename, so a
// reader never sees half a report. The temporary file is removed on every
// error path.
void write_replacing(const fs::path& target, const std::string& text) {
  if (target.has_parent_path()) fs::create_directories(target.parent_path());
  const std::string tmp = target.string() + ".tmp." + std::to_string(getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail_errno("cannot write report " + tmp);
  try {
    write_all(fd, text, tmp);
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::close(fd) != 0) {  // NFS and friends report a failed write here
    const int err = errno;
    ::unlink(tmp.c_str());
    errno = err;
    fail_errno("writing report " + tmp);
  }
  if (std::rename(tmp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    errno = err;
    fail_errno("cannot rename " + tmp + " to " + target.string());
  }
}

// The file a regular-file report replaces: a symlink is followed to its
// target (the link stays, the target is written; a dangling link's target is
// created), anything else is the path itself. Devices, FIFOs and sockets never
// get here: they are opened through the path, which follows links itself.
fs::path replace_target(const std::string& path) {
  std::error_code ec;
  fs::path p(path);
  for (int hops = 0; hops < 40 && fs::is_symlink(fs::symlink_status(p, ec)); ++hops) {
    const fs::path next = fs::read_symlink(p, ec);
    if (ec) break;
    p = next.is_absolute() ? next : p.parent_path() / next;
  }
  return p;
}

bool writable_dir(const fs::path& dir) { return ::access(dir.c_str(), W_OK | X_OK) == 0; }

}  // namespace

bool is_stdout_path(const std::string& path) { return path == "-" || path == "/dev/stdout"; }

std::string report_destination_problem(const std::string& path) {
  if (path.empty()) return "an empty path";
  if (is_stdout_path(path)) return "";
  for (const char c : path)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return "the path holds a control character";
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return fmt::format("'{}' is a directory", path);
    if (!S_ISREG(st.st_mode)) return "";  // a device, FIFO or socket: written through
    if (::access(path.c_str(), W_OK) != 0) return fmt::format("'{}' is not writable", path);
  }
  // A regular file, or none yet: the report is renamed into the target's folder,
  // the nearest existing folder above it must be a writable folder.
  const fs::path target = replace_target(path);
  return output_dir_problem(target.has_parent_path() ? target.parent_path().string() : ".");
}

std::string output_dir_problem(const std::string& dir_path) {
  for (const char c : dir_path)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return "the path holds a control character";
  fs::path dir(dir_path);
  std::error_code ec;
  while (!dir.empty() && !fs::exists(fs::symlink_status(dir, ec))) dir = dir.parent_path();
  if (dir.empty()) dir = ".";
  if (!fs::is_directory(dir, ec)) return fmt::format("'{}' is not a directory", dir.string());
  if (!writable_dir(dir)) return fmt::format("the folder '{}' is not writable", dir.string());
  return "";
}

void write_report(const json& doc, const std::string& path) {
  const std::string text = doc.dump(2) + "\n";
  if (is_stdout_path(path)) {
    std::cout << text << std::flush;
    if (!std::cout) throw std::runtime_error("writing the report to stdout failed");
    return;
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw std::runtime_error("report " + path + " is a directory");
    if (!S_ISREG(st.st_mode)) return write_through(path, st.st_mode, text);
  }
  write_replacing(replace_target(path), text);
}

}  // namespace gpuledger::report
