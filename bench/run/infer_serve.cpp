// Serving and measuring on one rank (see infer_serve.h).
#include "bench/run/infer_serve.h"

#include <algorithm>
#include <functional>

#include "analytic/inference.h"
#include "analytic/moe.h"
#include "analytic/params.h"
#include "bench/report/checks.h"
#include "comm/comm.h"
#include "core/attention_pattern.h"
#include "core/device_spec.h"
#include "kernels/registry/registry.h"
#include "models/io/hf_weights.h"
#include "models/io/token_file.h"
#include "models/kv/kv_format.h"
#include "models/transformer/infer_engine.h"
#include "models/transformer/infer_setup.h"
#include "models/transformer/kv_policy_error.h"
#if GPULEDGER_HAVE_MPI
#include "comm/mpi_check.h"
#endif

namespace gpuledger::run {

using nlohmann::json;

namespace {

// --tokens: request i's prompt is the token file's prompt i (token_file.h),
// the first prefix_len tokens those of request 0 (the shared prefix).
void prompts_from_file(std::vector<gpuledger::InferRequest>& requests, const std::string& path, int64_t prefix_len) {
  const TokenFile file(path);
  for (size_t i = 0; i < requests.size(); ++i) {
    auto& p = requests[i].prompt;
    file.prompt(static_cast<int64_t>(i), static_cast<int64_t>(p.size()), p.data());
    for (size_t t = 0; i > 0 && t < std::min(p.size(), static_cast<size_t>(prefix_len)); ++t)
      p[t] = requests[0].prompt[t];
  }
}

// The engine clock (docs/serving.md "Latency"): on the meta backend nothing
// runs, so a step takes its roofline time, max(FLOPs / peak FLOP/s, bytes read /
// peak bandwidth), from the device's datasheet — none without both peaks;
// elsewhere the measured seconds of the step's forward, and under tensor
// parallelism the slowest rank's (an all-reduce, so that every rank admits
// timed arrivals at the same step).
struct EngineClock {
  std::function<double(const StepCost&)> step_seconds;
  std::string name;
  bool known = true;
};

EngineClock engine_clock(const InferRequest& q, const InferPeaks& peaks) {
  EngineClock c;
  if (q.backend == "meta") {
    if (!peaks.flops || !peaks.bandwidth) {
      c.known = false;
      c.name = "none: the meta backend runs nothing and the device's peaks are unknown (give --device)";
      c.step_seconds = [](const StepCost&) { return 0.0; };
      return c;
    }
    const double flops = *peaks.flops, bw = *peaks.bandwidth;
    c.name = "modelled (meta backend): per step max(FLOPs / peak FLOP/s, bytes read / peak bandwidth)";
    c.step_seconds = [flops, bw](const StepCost& s) {
      return std::max(static_cast<double>(s.flops) / flops, static_cast<double>(s.bytes_read) / bw);
    };
    return c;
  }
  c.name = "measured: each step's forward, synchronized, on the host's steady clock";
#if GPULEDGER_HAVE_MPI
  if (q.config.layout.world() > 1) {
    c.name += "; the slowest rank's";
    c.step_seconds = [](const StepCost& s) {
      double t = s.measured_seconds;
      MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), "agreeing a step's seconds");
      return t;
    };
  }
#endif
  return c;
}

// What serving measured, before it is written into the report.
struct Served {
  kv::KvGeometry geometry;
  int64_t weights = 0, act = 0, pool = 0;
  int64_t measured_cap = 0, assigned_full = 0;
  analytic::KvCapacity predicted;
  EngineStats stats;
  int64_t completed = 0;
  int64_t peak_assigned = 0, peak_tokens = 0, null_block = 0;
  std::optional<KvErrorRecord> kv_error;
  std::optional<KvPolicyErrorRecord> kv_policy_error;
  int64_t evicted_tokens = 0;
  std::optional<LatencySummary> latency;
  std::string clock;
  int64_t host_swap_peak = 0;    // the rank ledger's `host` peak
  int64_t swap_peak_blocks = 0;  // the most blocks held in host memory at once
  int64_t block_bytes = 0;       // a paged cache's block
};

// The cost of the KV dtype: a side run of one decode step on a small cpu device.
std::optional<KvErrorRecord> kv_error(const InferRequest& q, const kv::KvGeometry& g) {
  if (q.kv.dtype == KvFormat::kBF16) return std::nullopt;
  Ledger el;
  auto edev = make_device("cpu", el);
  const int64_t ectx = std::min<int64_t>(q.context, 1024);
  const auto e = kv_attention_error(*edev, g, q.config.model.heads, ectx, q.kv_outliers, q.config.run.seed);
  return KvErrorRecord{e.rms_error, e.max_error, e.rms_reference, ectx, q.kv_outliers};
}

// The cost of the KV budget: the first few requests (prompt and generated
// tokens) through a budgeted and a full cache, on a cpu device and model of
// their own (the serving ledger stays the run's). Computed on the cpu backend
// and one rank; elsewhere the note says why not.
constexpr size_t kPolicyErrorSequences = 4;
std::optional<KvPolicyErrorRecord> kv_policy_error_record(const InferRequest& q, const kv::KvGeometry& g,
                                                          const InferWeights::UnitValues& values,
                                                          const std::vector<gpuledger::InferRequest>& requests,
                                                          const std::vector<InferResult>& results) {
  if (!q.kv.eviction.evicts()) return std::nullopt;
  KvPolicyErrorRecord rec;
  if (q.backend != "cpu" || q.config.layout.world() > 1) {
    rec.note = "not computed: the comparison runs on the cpu backend and one rank";
    return rec;
  }
  Ledger el;
  auto edev = make_device("cpu", el);
  CommCounters counters;
  auto self = make_self_comm("tp", counters, *edev);
  const auto& m = q.config.model;
  InferenceModel model(*edev, *self, m, q.config.run.dtype, q.config.run.seed, values);
  std::vector<std::vector<int32_t>> seqs;
  for (size_t i = 0; i < std::min(kPolicyErrorSequences, results.size()); ++i) {
    std::vector<int32_t> t = requests[i].prompt;
    t.insert(t.end(), results[i].tokens.begin(), results[i].tokens.end());
    seqs.push_back(std::move(t));
  }
  const auto e = kv_policy_error(model, g, layer_window(m, 0), q.kv.eviction, seqs);
  rec.computed = true;
  rec.sequences = e.sequences;
  rec.positions = e.positions;
  rec.rms = e.rms_error;
  rec.max = e.max_error;
  rec.reference_rms = e.rms_reference;
  rec.top1_agreement = e.top1_agreement;
  rec.note =
      "the first requests' prompts and generated tokens through a budgeted and a full cache, teacher-forced; "
      "next-token logits compared at every position past the budget";
  return rec;
}

Served serve(const InferRequest& q, const ServingRank& s) {
  const auto& m = q.config.model;
  const auto& l = q.config.layout;
  const int64_t dev_bytes = *q.config.device_memory_bytes;
  Served out;
  std::unique_ptr<CheckpointWeights> ckpt;  // --init-from: each rank reads its slice
  if (!q.config.run.init_from.empty()) ckpt = std::make_unique<CheckpointWeights>(q.config.run.init_from, m);
  InferWeights::UnitValues values;
  if (ckpt) values = [&](const UnitLayout& unit) { return ckpt->unit_values(unit); };
  InferenceModel model(s.device, s.tp, m, q.config.run.dtype, q.config.run.seed, values, q.config.run.attention);
  out.geometry = kv::kv_geometry(m, l, q.kv.dtype, q.kv.scales, 0, q.kv.group);
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
  const CacheSpec spec{kv_layout_name(q.kv.layout), q.kv.block, q.kv.max_model_len, layer_window(m, 0), q.kv.eviction};
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
    throw OutOfMemory("no room for a KV pool: weights and activations take all of utilization × memory", Account::kKv,
                      0, s.ledger.live_total(), dev_bytes);

  auto cache = make_kv_cache(s.device, g, out.pool, spec);
  EngineClock clock = engine_clock(q, s.peaks);
  EngineOptions options;
  options.max_batch = q.max_batch;
  options.max_num_batched_tokens = q.prefill_chunk;
  options.prefix_caching = q.prefix_caching;
  options.step_seconds = clock.step_seconds;
  // --preemption swap: host memory allocated through the serving device,
  // booked in the rank's ledger under `host` (outside the device total).
  std::optional<kv::KvSwapSpace> swap;
  if (q.preemption == "swap") options.swap = &swap.emplace();
  InferenceEngine engine(model, *cache, options);
  auto requests = make_requests(q.shapes, m.vocab, q.config.run.seed, q.prefix_len);
  if (!q.config.run.tokens.empty()) prompts_from_file(requests, q.config.run.tokens, q.prefix_len);
  const auto results = engine.run(requests);
  out.stats = engine.stats();
  out.clock = clock.name;
  if (clock.known) out.latency = summarize_latency(results, out.stats.clock_s);
  out.host_swap_peak = s.ledger.peak(Account::kHost);
  if (swap) out.swap_peak_blocks = swap->peak_swapped_blocks();
  for (size_t i = 0; i < results.size(); ++i)
    out.completed += static_cast<int64_t>(results[i].tokens.size()) == q.shapes[i].gen_len ? 1 : 0;
  out.kv_error = kv_error(q, g);
  out.kv_policy_error = kv_policy_error_record(q, g, values, requests, results);
  out.evicted_tokens = cache->evicted_tokens();
  out.peak_assigned = cache->peak_assigned_bytes();
  out.peak_tokens = cache->peak_token_bytes();
  if (q.kv.layout == KvLayout::kPaged) out.block_bytes = static_cast<const kv::PagedKvCache&>(*cache).block_bytes();
  out.null_block = out.block_bytes;  // a paged pool sets one block aside as the null block
  return out;
}

InferRankRecord rank_record(const InferRequest& q, const ServingRank& s, const Served& v) {
  const auto& m = q.config.model;
  const auto& l = q.config.layout;
  InferRankRecord r;
  r.rank = s.rank_id;
  r.served = true;
  r.peak_bytes = s.ledger.peak_total();
  if (s.ledger.events_enabled())
    r.torch = replay_torch_caching_allocator(
        s.ledger.events(), torch_cublas_workspace_bytes(q.config.device ? device_sm_major(*q.config.device) : 8));
  r.at_peak = s.ledger.at_peak();
  r.peak_by_account = s.ledger.peak_by_account();
  r.activation_peak_bytes = v.act;
  r.pool_rule_bytes = v.pool;
  r.kv_booked_bytes = s.ledger.peak(Account::kKv);
  r.kv_peak_assigned_bytes = v.peak_assigned;
  r.kv_peak_token_bytes = v.peak_tokens;
  r.waste_bytes = v.peak_assigned - v.null_block - v.geometry.fixed_scale_bytes() - v.peak_tokens;
  r.paged = q.kv.layout == KvLayout::kPaged;
  r.context = q.context;
  r.capacity_measured = v.measured_cap;
  r.assigned_bytes_full = v.assigned_full;
  r.predicted = v.predicted;
  r.analytic_weights_bytes = analytic::rank_params(m, l, s.rank_id) * dtype_bytes(q.config.run.dtype);
  r.analytic_kv_full_bytes = analytic::kv_reserved_bytes(m, l, q.kv, v.measured_cap, q.context);
  r.analytic_kv_bytes_per_token =
      analytic::kv_bytes_per_token(m, l, q.kv.dtype) + analytic::kv_scale_bytes_per_token(m, l, q.kv);
  r.analytic_activation_bytes =
      analytic::prefill_activation_bytes(m, l, q.config.run.dtype, q.prefill_chunk, q.config.run.attention);
  r.executed_flops = s.device.executed_flops();
  return r;
}

json serving_checks(const InferRequest& q, const Served& v, const InferRankRecord& r) {
  const auto d = [](int64_t x) { return static_cast<double>(x); };
  json checks = json::array();
  checks.push_back(bench::make_check("weights", r.rank, d(v.weights), d(r.analytic_weights_bytes), 0));
  // The profiled prefill's peak is the model's temporaries alone where the
  // backend's ops book no workspace of their own: meta, and the cpu in fp32
  // (in 16 bits its GEMMs stage fp32 copies of their operands, ops_gemm.cpp;
  // on cuda the attention kernels book their block tables).
  const ModelConfig& m = q.config.model;
  if (q.backend == "meta" || (q.backend == "cpu" && q.config.run.dtype == DType::kFP32))
    checks.push_back(bench::make_check("activation_peak", r.rank, d(v.act), d(r.analytic_activation_bytes), 0));
  checks.push_back(bench::make_check("kv.pool_rule", r.rank, d(v.pool), d(v.predicted.pool_bytes), 0));
  checks.push_back(bench::make_check("kv.capacity_sequences", r.rank, d(v.measured_cap), d(v.predicted.sequences), 0));
  checks.push_back(bench::make_check("kv.bytes_per_token", r.rank, d(v.geometry.token_bytes()),
                                     d(r.analytic_kv_bytes_per_token), 0));
  checks.push_back(
      bench::make_check("kv.assigned_when_full", r.rank, d(v.assigned_full), d(r.analytic_kv_full_bytes), 0));
  if (m.is_moe() && q.config.layout.tp == 1 && v.stats.decode_steps > 0) {
    // The decode weight bytes given the routing made: per step the dense
    // weights, router and shared experts once and each routed expert once.
    // Linear in the routed count, so summed over the steps by batch size.
    const Layout one;
    int64_t routed_model = 0;
    for (const auto& [batch, steps] : v.stats.decode_steps_by_batch)
      routed_model += steps * analytic::decode_weight_bytes_read(m, one, q.config.run.dtype, batch);
    // Every MoE layer's E experts (DeepSeek's first dense_layers have none).
    const int64_t unread =
        analytic::moe_layers_on_stage(m, one, 0) * m.num_experts * v.stats.decode_steps - v.stats.decode_experts_routed;
    routed_model -= unread * analytic::moe_expert_weight_bytes(m, q.config.run.dtype);
    checks.push_back(
        bench::make_check("moe.decode_weight_bytes", r.rank, d(v.stats.decode_weight_bytes_read), d(routed_model), 0));
  }
  if (q.preemption == "swap")  // the host peak: the most blocks swapped out at once × block bytes
    checks.push_back(bench::make_check("kv.swap.host_peak_bytes", r.rank, d(v.host_swap_peak),
                                       d(v.swap_peak_blocks) * d(v.block_bytes), 0));
  checks.push_back(
      bench::make_check("requests.completed", r.rank, d(v.completed), d(static_cast<int64_t>(q.shapes.size())), 0));
  return checks;
}

// Measured vs the uniform-routing model, means over the decode steps.
std::optional<MoeDecodeRecord> moe_decode_record(const InferRequest& q, const EngineStats& st) {
  const ModelConfig& m = q.config.model;
  if (!m.is_moe() || st.decode_steps == 0) return std::nullopt;
  MoeDecodeRecord r;
  const auto steps = static_cast<double>(st.decode_steps);
  const Layout& l = q.config.layout;
  r.decode_steps = st.decode_steps;
  r.layers = analytic::moe_layers_on_stage(m, l, 0);  // the MoE layers (not DeepSeek's first dense ones)
  r.experts = m.num_experts;
  r.top_k = m.experts_per_token;
  r.expert_weight_bytes = analytic::moe_expert_weight_bytes(m, q.config.run.dtype);
  r.experts_per_layer_step = static_cast<double>(st.decode_experts_routed) / (steps * static_cast<double>(r.layers));
  r.weight_bytes_per_step = static_cast<double>(st.decode_weight_bytes_read) / steps;
  for (const auto& [batch, n] : st.decode_steps_by_batch) {
    const double share = static_cast<double>(n) / steps;
    r.experts_per_layer_step_modeled += share * analytic::expected_distinct_experts(r.experts, r.top_k, batch);
    r.weight_bytes_per_step_modeled +=
        share * static_cast<double>(analytic::decode_weight_bytes_expected(m, l, q.config.run.dtype, batch));
  }
  return r;
}

InferServingRecord serving_record(const InferRequest& q, const ServingRank& s, const Served& v) {
  InferServingRecord r;
  r.moe = moe_decode_record(q, v.stats);
  r.stats = v.stats;
  r.kv_bytes_per_token = v.geometry.token_bytes();
  r.kv_scale_bytes_per_token = v.geometry.scale_bytes_per_token();
  r.capacity_sequences = v.measured_cap;
  r.capacity_predicted = v.predicted.sequences;
  r.kv_error = v.kv_error;
  r.kv_policy_error = v.kv_policy_error;
  r.evicted_tokens = v.evicted_tokens;
  r.computed = s.device.touches_memory();
  r.latency = v.latency;
  r.host_swap_peak_bytes = v.host_swap_peak;
  r.clock = v.clock;
  return r;
}

}  // namespace

void serve_and_measure(const InferRequest& q, const ServingRank& s, InferRecord& record) {
  const Served v = serve(q, s);
  record.ranks = {rank_record(q, s, v)};
  record.checks = serving_checks(q, v, record.ranks.front());
  record.serving = serving_record(q, s, v);
}

}  // namespace gpuledger::run
