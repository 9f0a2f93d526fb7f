// `gpuledger infer`: serve a stream of requests with a real KV cache on one
// rank and report what the cache really booked, assigned and used, the
// waste, the capacity measured by filling the pool next to the `kv`
// prediction, preemptions, prefill and decode throughput, decode bytes per
// step against the measured (cpu) or datasheet bandwidth, MFU beside it, and
// the attention error of the KV dtype against bf16.
//
// Steps (vLLM's start-up, then serving):
//   1. weights (deterministic init, no checkpoint), booked in `weights`;
//   2. one profiling prefill of --prefill-chunk tokens: its workspace peak;
//   3. pool = ⌊utilization × memory⌋ − weights − that peak − --overhead;
//   4. capacity: a cache of that pool filled with --context-token sequences
//      until admission fails (the same cache code on a bookkeeping device, so
//      the serving cache's peaks stay its own);
//   5. the engine serves --requests N (--prompt-len, --gen-len) or --trace.
// The analytic side (analytic/kv_cache.h) is called here only for
// the report's "analytic" section and the checks — never by the engine.
// Tensor parallelism: `mpirun -np N gpuledger infer --tp N` (dp = pp = 1;
// other layouts are refused, exit 2). Every rank builds its slice of the
// model (a_t query heads, k_t KV heads — replicated when t > kv_heads — the
// vocabulary-parallel embedding and head) and its own KV pool on its own
// device, and runs the same engine schedule (the same pool on every rank:
// the smallest, agreed by an all-reduce, so admission and preemption agree).
// Rank 0 gathers every rank's record (its measured pool and peaks) and
// writes the report; the analytic figures are per rank under the layout.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>

#include "bench/checks.h"
#include "kernels/registry/registry.h"
#include "bench/cli/commands.h"
#include "bench/cli/infer_report.h"
#include "bench/exit_codes.h"
#include "bench/peak.h"
#include "bench/report/report.h"
#include "core/device_spec.h"
#include "analytic/kv_cache.h"
#include "analytic/params.h"
#include "models/kv/kv_format.h"
#include "models/transformer/infer_engine.h"
#include "models/transformer/infer_setup.h"
#include "comm/comm.h"
#include "parallel/groups.h"
#if GPULEDGER_HAVE_MPI
#include "comm/mpi_check.h"
#include "comm/mpi_runtime.h"
#endif

namespace gpuledger {
class MpiRuntime;  // comm/mpi_runtime.h (built only with MPI)
}

namespace gpuledger::cli {

using nlohmann::json;

namespace {

struct InferOptions {
  Options common;
  std::string backend = "cpu";
  int64_t prompt_len = 128, gen_len = 32, max_batch = 256, prefill_chunk = 2048, prefix_len = 0;
  int64_t kv_outliers = 0;
  std::string trace;
  std::optional<double> peak_flops;
};

json account_json(const AccountBytes& a) {
  json j;
  for (int i = 0; i < kNumAccounts; ++i) j[std::string(account_name(static_cast<Account>(i)))] = a[static_cast<Account>(i)];
  return j;
}

struct Peaks {
  std::optional<double> flops, bandwidth;
  std::string flops_source, bandwidth_source;
};

// On the CPU both are measured now, in this session, on a device of their own;
// elsewhere they come from the device's datasheet.
Peaks resolve_peaks(const InferOptions& o, const Resolved& r) {
  Peaks p;
  if (o.backend == "cpu") {
    Ledger scratch;
    auto dev = make_device("cpu", scratch);
    const auto bw = bench::measure_bandwidth(*dev, int64_t{64} << 20, 1, 5);
    p.bandwidth = bw.bytes_per_s;
    p.bandwidth_source = "measured now: STREAM add over 3 × 64 MiB arrays on the cpu backend";
    const auto peak = bench::measure_cpu_session_peak();
    p.flops = peak.flops_per_s;
    p.flops_source = peak.source;
  } else if (r.device) {
    p.bandwidth = r.device->bandwidth_bytes_per_s;
    p.bandwidth_source = r.device->name + " datasheet (" + r.device->source + ")";
    p.flops = device_peak_flops(*r.device, r.run.dtype);
    p.flops_source = p.bandwidth_source;
  } else {
    p.bandwidth_source = p.flops_source = "unknown (no --device)";
  }
  if (o.peak_flops) {
    p.flops = *o.peak_flops;
    p.flops_source = "--peak-flops";
  }
  return p;
}

// Whether an MPI launcher started this process (as `train` checks it).
bool under_mpirun() {
  for (auto v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_PROCID"})
    if (std::getenv(v)) return true;
  return false;
}

// One serving rank: the only one (mpi null), or tp rank mpi->world_rank() of an MPI job.
int serve_rank(InferOptions& o, const Resolved& r, MpiRuntime* mpi);

int run_infer(InferOptions& o) {
  const Resolved r = resolve(o.common);
  const Layout& l = r.layout;
  if (l.world() == 1) return serve_rank(o, r, nullptr);
  if (l.dp != 1 || l.pp != 1)
    throw LayoutError(fmt::format("infer parallelises over --tp only (dp = pp = 1), got dp {} tp {} pp {}", l.dp,
                                  l.tp, l.pp));
  if (!under_mpirun())
    throw LayoutError(fmt::format("infer --tp {} runs one process per rank: mpirun -np {} gpuledger infer --tp {}",
                                  l.tp, l.tp, l.tp));
#if GPULEDGER_HAVE_MPI
  MpiRuntime mpi;
  return serve_rank(o, r, &mpi);
#else
  throw LayoutError(fmt::format("infer --tp {} needs MPI, and this binary was built without it", l.tp));
#endif
}

int serve_rank(InferOptions& o, const Resolved& r, MpiRuntime* mpi) {
  const ModelConfig& m = r.model;
  const Layout& l = r.layout;
#if GPULEDGER_HAVE_MPI
  const int64_t rank_id = mpi ? mpi->world_rank() : 0;
#else
  (void)mpi;
  const int64_t rank_id = 0;
#endif
  if (!r.device_memory_bytes) throw ConfigError("device", "infer sizes its KV pool from device memory: give --device or --device-memory");
  const analytic::KvOptions akv = resolve_kv(o.common, m);
  const KvFormat format = *kv_format_from_name(o.common.kv_dtype);
  const KvScales scales = *kv_scales_from_name(o.common.kv_scales);
  const int64_t dev_bytes = *r.device_memory_bytes;
  const int64_t overhead = parse_size(o.common.overhead);
  const double util = o.common.memory_utilization;

  std::vector<RequestShape> shapes;
  if (!o.trace.empty())
    shapes = read_trace(o.trace);
  else
    shapes.assign(static_cast<size_t>(o.common.requests), RequestShape{o.prompt_len, o.gen_len, 0});
  int64_t longest = 0;
  for (const auto& s : shapes) longest = std::max(longest, s.prompt_len + s.gen_len);
  const int64_t context = o.common.context > 0 ? o.common.context : longest;
  if (akv.layout == KvLayout::kContiguous && context > akv.max_model_len)
    throw LayoutError(fmt::format("--context {} exceeds --max-model-len {}", context, akv.max_model_len));
  if (o.prefix_len > 0)
    for (const auto& s : shapes)
      if (s.prompt_len < o.prefix_len) throw ConfigError("prefix-len", "--prefix-len is longer than a prompt");
  const int64_t chunk = m.is_gpt() ? std::min(o.prefill_chunk, m.max_seq) : o.prefill_chunk;

  json doc = report::make_report("infer");
  doc["env"]["backend"] = o.backend;
  doc["env"]["world"] = l.world();
  doc["config"] = report::config_json(r);
  doc["config"]["infer"] = {{"kv", o.common.kv_layout}, {"kv_dtype", o.common.kv_dtype}, {"kv_scales", o.common.kv_scales},
                            {"block", akv.block}, {"max_model_len", akv.max_model_len}, {"context", context},
                            {"requests", static_cast<int64_t>(shapes.size())}, {"prompt_len", o.prompt_len},
                            {"gen_len", o.gen_len}, {"trace", o.trace}, {"max_batch", o.max_batch},
                            {"prefill_chunk", chunk}, {"prefix_len", o.prefix_len}, {"memory_utilization", util},
                            {"device_memory_bytes", dev_bytes}, {"overhead_bytes", overhead},
                            {"kv_outliers", o.kv_outliers}};
  doc["params"] = {{"total", analytic::model_params(m)}};
  const Peaks peaks = resolve_peaks(o, r);

  Ledger ledger(dev_bytes);
  auto dev = make_device(o.backend, ledger, static_cast<int>(rank_id));
  doc["env"]["device"] = dev->description();
  CommCounters counters;
  std::unique_ptr<Comm> self;
  std::optional<Groups> groups;  // MPI: the tp group is the world (dp = pp = 1)
  Comm* tp = nullptr;
  if (mpi) {
    groups.emplace(make_mpi_groups(l, counters, *dev, m.tied_embeddings, comm_backend_for(o.backend)));  // cuda: NCCL; LayoutError on every rank: np != tp
    tp = groups->tp.get();
  } else {
    self = make_self_comm("tp", counters, *dev);
    tp = self.get();
  }
  json checks = json::array();
  json rank = {{"rank", rank_id}, {"coords", {{"dp", 0}, {"tp", rank_id}, {"pp", 0}}}};
  try {
    InferenceModel model(*dev, *tp, m, r.run.dtype, r.run.seed);
    const kv::KvGeometry g = kv::kv_geometry(m, l, format, scales);
    const int64_t weights = model.weights().bytes();
    const int64_t act = profile_activation_peak(model, g, chunk);
    ledger.reset_peaks();
    int64_t pool = serving_pool_bytes(dev_bytes, util, weights, act, overhead);
#if GPULEDGER_HAVE_MPI
    // Every rank must run the same schedule: the same pool (equal anyway for
    // equal slices; the smallest, should a rank's profile differ).
    if (mpi) MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &pool, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD), "agreeing the KV pool");
#endif
    const CacheSpec spec{o.common.kv_layout, akv.block, akv.max_model_len, m.sliding_window};

    // capacity, measured on a bookkeeping twin of the cache
    Ledger twin_ledger;
    auto twin_dev = make_device("meta", twin_ledger);
    int64_t assigned_full = 0, measured_cap = 0;
    if (pool > 0) {
      auto twin = make_kv_cache(*twin_dev, g, pool, spec);
      measured_cap = fill_capacity(*twin, context, 0, &assigned_full);
    }
    const auto predicted = analytic::kv_capacity(m, l, akv, dev_bytes, util, weights, act, overhead, context);
    if (pool <= 0) throw OutOfMemory("no room for a KV pool: weights and activations take all of utilization × memory",
                                     Account::kKv, 0, ledger.live_total(), dev_bytes);

    auto cache = make_kv_cache(*dev, g, pool, spec);
    InferenceEngine engine(model, *cache, {o.max_batch, chunk, o.prefix_len});
    const auto requests = make_requests(shapes, m.vocab, r.run.seed, o.prefix_len);
    const auto results = engine.run(requests);
    const EngineStats& st = engine.stats();
    int64_t completed = 0;
    for (size_t i = 0; i < results.size(); ++i)
      completed += static_cast<int64_t>(results[i].tokens.size()) == shapes[i].gen_len ? 1 : 0;

    // the cost of the KV dtype: a side run of one decode step on a small cpu device
    json kv_error = nullptr;
    if (format != KvFormat::kBF16) {
      Ledger el;
      auto edev = make_device("cpu", el);
      const int64_t ectx = std::min<int64_t>(context, 1024);
      const auto e = kv_attention_error(*edev, g, m.heads, ectx, o.kv_outliers, r.run.seed);
      kv_error = {{"rms", e.rms_error}, {"max", e.max_error}, {"reference_rms", e.rms_reference},
                  {"context", ectx}, {"outlier_channels", o.kv_outliers},
                  {"note", "K, V, Q drawn N(0,1); the first --kv-outliers key channels of every head ×50, the query 0 there"}};
    }

    // ---- the rank's record ----
    const int64_t peak_assigned = cache->peak_assigned_bytes(), peak_tokens = cache->peak_token_bytes();
    const bool paged = o.common.kv_layout == "paged";
    json measured = {{"peak_bytes", ledger.peak_total()}, {"at_peak", account_json(ledger.at_peak())},
                     {"peak_by_account", account_json(ledger.peak_by_account())},
                     {"activation_peak_bytes", act}, {"pool_rule_bytes", pool}};
    measured["kv"] = {{"pool_bytes", ledger.peak(Account::kKv)}, {"peak_assigned_bytes", peak_assigned},
                      {"peak_token_bytes", peak_tokens}};
    const int64_t null_block = paged ? static_cast<const kv::PagedKvCache&>(*cache).block_bytes() : 0;
    measured["waste"] = {{"bytes", peak_assigned - null_block - g.fixed_scale_bytes() - peak_tokens},
                         {"kind", paged ? "internal (block rounding)" : "reservation (max-model-len − length)"},
                         {"token_fraction", peak_assigned > 0 ? static_cast<double>(peak_tokens) / peak_assigned : 0.0},
                         {"note", "assigned and token peaks may fall on different steps; the null block and fixed "
                                  "scales are left out of the waste"}};
    rank["measured"] = measured;
    rank["capacity"] = {{"context", context}, {"measured", measured_cap}, {"predicted", predicted.sequences},
                        {"pool_bytes", pool}, {"assigned_bytes_full", assigned_full}};
    const int64_t analytic_weights = analytic::rank_params(m, l, rank_id) * dtype_bytes(r.run.dtype);
    rank["analytic"] = {{"exact", {{"weights", analytic_weights},
                                   {"kv_full", analytic::kv_reserved_bytes(m, l, akv, measured_cap, context)}}},
                        {"capacity", {{"pool_bytes", predicted.pool_bytes}, {"sequences", predicted.sequences},
                                      {"tokens", predicted.tokens}}},
                        {"kv_bytes_per_token", analytic::kv_bytes_per_token(m, l, akv.dtype) +
                                                   analytic::kv_scale_bytes_per_token(m, l, akv)}};
    rank["flops"] = {{"executed", dev->executed_flops()}};
    doc["ranks"] = json::array({rank});

    checks.push_back(bench::make_check("weights", rank_id, static_cast<double>(weights), static_cast<double>(analytic_weights), 0));
    checks.push_back(bench::make_check("kv.pool_rule", rank_id, static_cast<double>(pool), static_cast<double>(predicted.pool_bytes), 0));
    checks.push_back(bench::make_check("kv.capacity_sequences", rank_id, static_cast<double>(measured_cap),
                                       static_cast<double>(predicted.sequences), 0));
    checks.push_back(bench::make_check("kv.assigned_when_full", rank_id, static_cast<double>(assigned_full),
                                       static_cast<double>(analytic::kv_reserved_bytes(m, l, akv, measured_cap, context)), 0));
    checks.push_back(bench::make_check("requests.completed", rank_id, static_cast<double>(completed),
                                       static_cast<double>(shapes.size()), 0));

    // ---- summary ----
    json s;
    auto rate = [](double n, double sec) { return sec > 0 ? n / sec : 0.0; };
    const double dsec = st.decode_seconds;
    const double bytes_per_step = st.decode_steps > 0 ? static_cast<double>(st.decode_bytes_read) / st.decode_steps : 0.0;
    const double bps = rate(static_cast<double>(st.decode_bytes_read), dsec);
    s["prefill"] = {{"steps", st.prefill_steps}, {"tokens", st.prefill_tokens}, {"seconds", st.prefill_seconds},
                    {"tokens_per_s", rate(static_cast<double>(st.prefill_tokens), st.prefill_seconds)},
                    {"flops", st.prefill_flops}};
    s["decode"] = {{"steps", st.decode_steps}, {"tokens", st.decode_tokens}, {"seconds", dsec},
                   {"tokens_per_s", rate(static_cast<double>(st.decode_tokens), dsec)},
                   {"bytes_read", st.decode_bytes_read}, {"bytes_per_step", bytes_per_step}, {"bytes_per_s", bps},
                   {"bandwidth_utilization", peaks.bandwidth && dsec > 0 ? json(bps / *peaks.bandwidth) : json(nullptr)},
                   {"flops", st.decode_flops},
                   {"mfu", peaks.flops && dsec > 0 ? json(st.decode_flops / dsec / *peaks.flops) : json(nullptr)},
                   {"max_batch", st.max_decode_batch}};
    s["tokens_per_s"] = s["decode"]["tokens_per_s"];
    s["peak_bandwidth"] = peaks.bandwidth ? json(*peaks.bandwidth) : json(nullptr);
    s["bandwidth_source"] = peaks.bandwidth_source;
    s["peak_flops"] = peaks.flops ? json(*peaks.flops) : json(nullptr);
    s["peak_source"] = peaks.flops_source;
    s["mfu"] = s["decode"]["mfu"];
    s["preemptions"] = st.preemptions;
    s["prefix_tokens_shared"] = st.prefix_tokens_shared;
    s["peak_running"] = st.peak_running;
    s["kv_bytes_per_token"] = g.token_bytes();
    s["capacity_sequences"] = measured_cap;
    s["capacity_predicted"] = predicted.sequences;
    s["kv_error"] = kv_error;
    s["note"] = dev->touches_memory() ? "" : "meta backend: nothing computed, times and tokens are not meaningful";
    doc["summary"] = s;
  } catch (const OutOfMemory& e) {
    doc["status"] = "oom";
    doc["error"] = e.what();
  }
  doc["checks"] = checks;
#if GPULEDGER_HAVE_MPI
  if (mpi) {  // rank 0 gathers every rank's record and checks; the summary is rank 0's
    json mine = {{"record", doc.contains("ranks") ? doc["ranks"][0] : rank}, {"checks", checks},
                 {"status", doc["status"]}, {"error", doc.value("error", "")}};
    const auto all = gather_strings(mine.dump());
    const bool ok = doc["status"] == "ok" && bench::all_ok(checks);
    if (rank_id != 0) return ok ? kExitOk : kExitFailed;
    doc["ranks"] = json::array();
    doc["checks"] = json::array();
    for (const auto& a : all) {
      const json j = json::parse(a);
      doc["ranks"].push_back(j["record"]);
      for (const auto& c : j["checks"]) doc["checks"].push_back(c);
      if (j["status"] != "ok" && doc["status"] == "ok") {
        doc["status"] = j["status"];
        doc["error"] = j["error"];
      }
    }
  }
#endif
  if (!o.common.json_path.empty()) report::write_report(doc, o.common.json_path);
  if (!o.common.quiet) print_infer_summary(table_stream(o.common), doc);
  if (doc["status"] != "ok") return kExitFailed;
  return bench::all_ok(doc["checks"]) ? kExitOk : kExitFailed;
}

}  // namespace

void add_infer_command(CLI::App& root, std::vector<Command>& out) {
  auto o = std::make_shared<InferOptions>();  // CLI11 binds to it; the run closure keeps it alive
  auto* app = root.add_subcommand("infer", "serve requests with a KV cache: bytes reserved and used, waste, capacity, "
                                           "throughput and bandwidth, beside the kv prediction");
  add_model_options(*app, o->common);
  add_layout_options(*app, o->common);
  add_run_options(*app, o->common);
  add_device_options(*app, o->common);
  add_kv_options(*app, o->common);
  const char* g = "Infer";
  const auto count = CLI::Range(int64_t{1}, int64_t{1} << 40);
  app->add_option("--backend", o->backend, "cpu | meta (no memory touched) | cuda")->capture_default_str()
      ->check(CLI::IsMember({"cpu", "meta", "cuda"}))->group(g);
  app->add_option("--prompt-len", o->prompt_len, "prompt tokens per request")->capture_default_str()->check(count)->group(g);
  app->add_option("--gen-len", o->gen_len, "tokens generated per request")->capture_default_str()->check(count)->group(g);
  app->add_option("--trace", o->trace, "JSONL requests: {\"prompt_len\", \"gen_len\", \"arrival\"} per line")
      ->check(CLI::ExistingFile)->group(g);
  app->add_option("--max-batch", o->max_batch, "running sequences at most (vLLM max_num_seqs)")->capture_default_str()
      ->check(count)->group(g);
  app->add_option("--prefill-chunk", o->prefill_chunk, "new tokens per prefill step; also the profiling forward")
      ->capture_default_str()->check(count)->group(g);
  app->add_option("--prefix-len", o->prefix_len, "prompt tokens every request shares (prefix sharing, paged)")
      ->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{1} << 40))->group(g);
  app->add_option("--kv-outliers", o->kv_outliers, "key channels scaled ×50 in the KV-error side run")
      ->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{1} << 20))->group(g);
  app->add_option("--peak-flops", o->peak_flops, "peak FLOP/s for the MFU")->group(g);
  add_output_options(*app, o->common);
  out.push_back({app, [o]() { return run_infer(*o); }});
}

}  // namespace gpuledger::cli
