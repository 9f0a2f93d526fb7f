// Serving and measuring on one rank (see infer_serve.h).
#include "bench/run/infer_serve.h"

#include <algorithm>

#include "analytic/params.h"
#include "bench/checks.h"
#include "bench/report/ledger_json.h"
#include "kernels/registry/registry.h"
#include "models/kv/kv_format.h"
#include "models/transformer/infer_engine.h"
#include "models/transformer/infer_setup.h"
#if GPULEDGER_HAVE_MPI
#include "comm/mpi_check.h"
#endif

namespace gpuledger::run {

using nlohmann::json;

namespace {

// What serving measured, before it is written into the report.
struct Served {
  kv::KvGeometry geometry;
  int64_t weights = 0, act = 0, pool = 0;
  int64_t measured_cap = 0, assigned_full = 0;
  analytic::KvCapacity predicted;
  EngineStats stats;
  int64_t completed = 0;
  int64_t peak_assigned = 0, peak_tokens = 0, null_block = 0;
  json kv_error = nullptr;
};

// The cost of the KV dtype: a side run of one decode step on a small cpu device.
json kv_error_json(const InferRequest& q, const kv::KvGeometry& g) {
  if (q.kv.dtype == KvFormat::kBF16) return nullptr;
  Ledger el;
  auto edev = make_device("cpu", el);
  const int64_t ectx = std::min<int64_t>(q.context, 1024);
  const auto e = kv_attention_error(*edev, g, q.config.model.heads, ectx, q.kv_outliers, q.config.run.seed);
  return {{"rms", e.rms_error}, {"max", e.max_error}, {"reference_rms", e.rms_reference},
          {"context", ectx}, {"outlier_channels", q.kv_outliers},
          {"note", "K, V, Q drawn N(0,1); the first --kv-outliers key channels of every head ×50, the query 0 there"}};
}

Served serve(const InferRequest& q, const ServingRank& s) {
  const auto& m = q.config.model;
  const auto& l = q.config.layout;
  const int64_t dev_bytes = *q.config.device_memory_bytes;
  Served out;
  InferenceModel model(s.device, s.tp, m, q.config.run.dtype, q.config.run.seed);
  out.geometry = kv::kv_geometry(m, l, q.kv.dtype, q.kv.scales);
  const auto& g = out.geometry;
  out.weights = model.weights().bytes();
  out.act = profile_activation_peak(model, g, q.prefill_chunk);
  s.ledger.reset_peaks();
  out.pool = serving_pool_bytes(dev_bytes, q.memory_utilization, out.weights, out.act, q.overhead_bytes);
#if GPULEDGER_HAVE_MPI
  // Every rank must run the same schedule: the same pool (equal anyway for
  // equal slices; the smallest, should a rank's profile differ).
  if (l.world() > 1)
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &out.pool, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD), "agreeing the KV pool");
#endif
  const CacheSpec spec{kv_layout_name(q.kv.layout), q.kv.block, q.kv.max_model_len, m.sliding_window};
  // capacity, measured on a bookkeeping twin of the cache
  Ledger twin_ledger;
  auto twin_dev = make_device("meta", twin_ledger);
  if (out.pool > 0) {
    auto twin = make_kv_cache(*twin_dev, g, out.pool, spec);
    out.measured_cap = fill_capacity(*twin, q.context, 0, &out.assigned_full);
  }
  out.predicted = analytic::kv_capacity(m, l, q.kv, dev_bytes, q.memory_utilization, out.weights, out.act,
                                        q.overhead_bytes, q.context);
  if (out.pool <= 0)
    throw OutOfMemory("no room for a KV pool: weights and activations take all of utilization × memory",
                      Account::kKv, 0, s.ledger.live_total(), dev_bytes);

  auto cache = make_kv_cache(s.device, g, out.pool, spec);
  InferenceEngine engine(model, *cache, {q.max_batch, q.prefill_chunk, q.prefix_len});
  const auto requests = make_requests(q.shapes, m.vocab, q.config.run.seed, q.prefix_len);
  const auto results = engine.run(requests);
  out.stats = engine.stats();
  for (size_t i = 0; i < results.size(); ++i)
    out.completed += static_cast<int64_t>(results[i].tokens.size()) == q.shapes[i].gen_len ? 1 : 0;
  out.kv_error = kv_error_json(q, g);
  out.peak_assigned = cache->peak_assigned_bytes();
  out.peak_tokens = cache->peak_token_bytes();
  if (q.kv.layout == KvLayout::kPaged) out.null_block = static_cast<const kv::PagedKvCache&>(*cache).block_bytes();
  return out;
}

void write_rank_record(const InferRequest& q, const ServingRank& s, const Served& v, json& rank) {
  const auto& m = q.config.model;
  const auto& l = q.config.layout;
  const auto& akv = q.kv;
  const bool paged = akv.layout == KvLayout::kPaged;
  json measured = {{"peak_bytes", s.ledger.peak_total()},
                   {"at_peak", report::account_bytes_json(s.ledger.at_peak())},
                   {"peak_by_account", report::account_bytes_json(s.ledger.peak_by_account())},
                   {"activation_peak_bytes", v.act}, {"pool_rule_bytes", v.pool}};
  measured["kv"] = {{"pool_bytes", s.ledger.peak(Account::kKv)}, {"peak_assigned_bytes", v.peak_assigned},
                    {"peak_token_bytes", v.peak_tokens}};
  measured["waste"] = {{"bytes", v.peak_assigned - v.null_block - v.geometry.fixed_scale_bytes() - v.peak_tokens},
                       {"kind", paged ? "internal (block rounding)" : "reservation (max-model-len − length)"},
                       {"token_fraction", v.peak_assigned > 0 ? static_cast<double>(v.peak_tokens) / v.peak_assigned : 0.0},
                       {"note", "assigned and token peaks may fall on different steps; the null block and fixed "
                                "scales are left out of the waste"}};
  rank["measured"] = measured;
  rank["capacity"] = {{"context", q.context}, {"measured", v.measured_cap}, {"predicted", v.predicted.sequences},
                      {"pool_bytes", v.pool}, {"assigned_bytes_full", v.assigned_full}};
  const int64_t analytic_weights = analytic::rank_params(m, l, s.rank_id) * dtype_bytes(q.config.run.dtype);
  rank["analytic"] = {{"exact", {{"weights", analytic_weights},
                                 {"kv_full", analytic::kv_reserved_bytes(m, l, akv, v.measured_cap, q.context)}}},
                      {"capacity", {{"pool_bytes", v.predicted.pool_bytes}, {"sequences", v.predicted.sequences},
                                    {"tokens", v.predicted.tokens}}},
                      {"kv_bytes_per_token", analytic::kv_bytes_per_token(m, l, akv.dtype) +
                                                 analytic::kv_scale_bytes_per_token(m, l, akv)}};
  rank["flops"] = {{"executed", s.device.executed_flops()}};
}

json serving_checks(const InferRequest& q, const ServingRank& s, const Served& v) {
  const auto& m = q.config.model;
  const auto& l = q.config.layout;
  const int64_t id = s.rank_id;
  const auto d = [](int64_t x) { return static_cast<double>(x); };
  const int64_t analytic_weights = analytic::rank_params(m, l, id) * dtype_bytes(q.config.run.dtype);
  json checks = json::array();
  checks.push_back(bench::make_check("weights", id, d(v.weights), d(analytic_weights), 0));
  checks.push_back(bench::make_check("kv.pool_rule", id, d(v.pool), d(v.predicted.pool_bytes), 0));
  checks.push_back(bench::make_check("kv.capacity_sequences", id, d(v.measured_cap), d(v.predicted.sequences), 0));
  checks.push_back(bench::make_check("kv.assigned_when_full", id, d(v.assigned_full),
                                     d(analytic::kv_reserved_bytes(m, l, q.kv, v.measured_cap, q.context)), 0));
  checks.push_back(bench::make_check("requests.completed", id, d(v.completed), d(static_cast<int64_t>(q.shapes.size())), 0));
  return checks;
}

json serving_summary(const ServingRank& s, const Served& v) {
  const EngineStats& st = v.stats;
  const InferPeaks& peaks = s.peaks;
  json j;
  auto rate = [](double n, double sec) { return sec > 0 ? n / sec : 0.0; };
  const double dsec = st.decode_seconds;
  const double bytes_per_step = st.decode_steps > 0 ? static_cast<double>(st.decode_bytes_read) / st.decode_steps : 0.0;
  const double bps = rate(static_cast<double>(st.decode_bytes_read), dsec);
  j["prefill"] = {{"steps", st.prefill_steps}, {"tokens", st.prefill_tokens}, {"seconds", st.prefill_seconds},
                  {"tokens_per_s", rate(static_cast<double>(st.prefill_tokens), st.prefill_seconds)},
                  {"flops", st.prefill_flops}};
  j["decode"] = {{"steps", st.decode_steps}, {"tokens", st.decode_tokens}, {"seconds", dsec},
                 {"tokens_per_s", rate(static_cast<double>(st.decode_tokens), dsec)},
                 {"bytes_read", st.decode_bytes_read}, {"bytes_per_step", bytes_per_step}, {"bytes_per_s", bps},
                 {"bandwidth_utilization", peaks.bandwidth && dsec > 0 ? json(bps / *peaks.bandwidth) : json(nullptr)},
                 {"flops", st.decode_flops},
                 {"mfu", peaks.flops && dsec > 0 ? json(st.decode_flops / dsec / *peaks.flops) : json(nullptr)},
                 {"max_batch", st.max_decode_batch}};
  j["tokens_per_s"] = j["decode"]["tokens_per_s"];
  j["peak_bandwidth"] = peaks.bandwidth ? json(*peaks.bandwidth) : json(nullptr);
  j["bandwidth_source"] = peaks.bandwidth_source;
  j["peak_flops"] = peaks.flops ? json(*peaks.flops) : json(nullptr);
  j["peak_source"] = peaks.flops_source;
  j["mfu"] = j["decode"]["mfu"];
  j["preemptions"] = st.preemptions;
  j["prefix_tokens_shared"] = st.prefix_tokens_shared;
  j["peak_running"] = st.peak_running;
  j["kv_bytes_per_token"] = v.geometry.token_bytes();
  j["capacity_sequences"] = v.measured_cap;
  j["capacity_predicted"] = v.predicted.sequences;
  j["kv_error"] = v.kv_error;
  j["note"] = s.device.touches_memory() ? "" : "meta backend: nothing computed, times and tokens are not meaningful";
  return j;
}

}  // namespace

void serve_and_measure(const InferRequest& q, const ServingRank& s, json& rank, json& doc) {
  const Served v = serve(q, s);
  write_rank_record(q, s, v, rank);
  doc["ranks"] = json::array({rank});
  doc["checks"] = serving_checks(q, s, v);
  doc["summary"] = serving_summary(s, v);
}

}  // namespace gpuledger::run
