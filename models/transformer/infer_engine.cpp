// InferenceEngine (see infer_engine.h): the scheduler loop, the step's
// schedule (decodes, prefill chunks, admissions under the token budget),
// recompute preemption, prefix caching by block hash and the engine clock; the
// KV-dtype error side run (the trace reader is request_trace.cpp).
#include "models/transformer/infer_engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>

#include "models/kv/block_hash.h"
#include "models/transformer/data.h"

namespace gpuledger {

struct InferenceEngine::Seq {
  size_t req = 0;               // index of its request / result
  std::vector<int32_t> tokens;  // prompt, then the tokens generated so far
  int64_t prompt_len = 0;       // the request's own prompt
  int64_t gen_len = 1;
  int64_t arrival = 0;
  double arrival_s = 0;
  kv::SeqId kv_id = -1;         // while running
  int64_t computed = 0;         // tokens whose K/V are in the cache
  int64_t prefill_len = 0;      // the prompt of this admission (recompute: prompt + generated)
  int64_t scheduled_step = -1;  // the last step that carries it
  int64_t generated() const { return static_cast<int64_t>(tokens.size()) - prompt_len; }
  // Decode holds back the last generated token's K/V (the next step computes
  // it), so prefill is "computed < prefill_len", not "< tokens".
  bool prefilling() const { return computed < prefill_len; }
};

// One step's batch: the sequences it carries and their new tokens, in order.
struct InferenceEngine::Batch {
  std::vector<kv::SeqStep> steps;
  std::vector<int32_t> tokens;
  std::vector<Seq*> members;
  int64_t decodes = 0, prefill_tokens = 0;
};

InferenceEngine::InferenceEngine(InferenceModel& model, kv::KvCache& cache, EngineOptions options)
    : model_(model), cache_(cache), opt_(std::move(options)) {
  if (opt_.max_batch < 1) throw std::invalid_argument("max_batch must be >= 1");
  if (opt_.max_num_batched_tokens < 1) throw std::invalid_argument("max_num_batched_tokens must be >= 1");
  if (opt_.swap && dynamic_cast<kv::PagedKvCache*>(&cache_) == nullptr)
    throw std::invalid_argument("preemption by swap needs a paged KV cache");
  // A swapped sequence comes back under a new id with a fresh slot map, while
  // its blocks keep the old map's scattered order.
  const KvPolicy policy = cache_.eviction().policy;
  if (opt_.swap && (policy == KvPolicy::kSink || policy == KvPolicy::kH2O))
    throw std::invalid_argument(std::string("preemption by swap with KV policy ") +
                                std::string(kv_policy_name(policy)) + ": use preemption by recompute");
}

InferenceEngine::~InferenceEngine() = default;

namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

std::vector<InferResult> InferenceEngine::run(const std::vector<InferRequest>& requests) {
  seqs_.clear();
  seqs_.reserve(requests.size());
  results_.assign(requests.size(), InferResult{});
  waiting_.clear();
  running_.clear();
  swapped_.clear();
  clock_s_ = 0;
  const auto* contiguous = dynamic_cast<const kv::ContiguousKvCache*>(&cache_);
  for (size_t i = 0; i < requests.size(); ++i) {
    const InferRequest& r = requests[i];
    if (r.prompt.empty() || r.gen_len < 1)
      throw std::invalid_argument("request " + std::to_string(r.id) + ": needs a prompt and gen_len >= 1");
    if (!(r.arrival_s >= 0) || !std::isfinite(r.arrival_s))
      throw std::invalid_argument("request " + std::to_string(r.id) + ": arrival_s must be finite and >= 0");
    const int64_t longest = static_cast<int64_t>(r.prompt.size()) + r.gen_len - 1;  // K/V it ever holds
    if (contiguous && longest > contiguous->max_model_len())
      throw std::invalid_argument("request " + std::to_string(r.id) + " reaches " + std::to_string(longest) +
                                  " tokens, over max-model-len " + std::to_string(contiguous->max_model_len()));
    Seq s;
    s.req = i;
    s.tokens = r.prompt;
    s.prompt_len = static_cast<int64_t>(r.prompt.size());
    s.gen_len = r.gen_len;
    s.arrival = r.arrival;
    s.arrival_s = r.arrival_s;
    seqs_.push_back(std::move(s));
    results_[i].id = r.id;
  }
  std::vector<Seq*> pending;  // not yet arrived, by arrival step, then time, then order
  for (auto& s : seqs_) pending.push_back(&s);
  std::stable_sort(pending.begin(), pending.end(), [](Seq* a, Seq* b) {
    return a->arrival != b->arrival ? a->arrival < b->arrival : a->arrival_s < b->arrival_s;
  });
  size_t next_arrival = 0;

  int64_t step = 0;
  while (next_arrival < pending.size() || !waiting_.empty() || !running_.empty() || !swapped_.empty()) {
    if (running_.empty() && waiting_.empty() && swapped_.empty()) {  // idle until the next arrival
      step = std::max(step, pending[next_arrival]->arrival);
      clock_s_ = std::max(clock_s_, pending[next_arrival]->arrival_s);
    }
    while (next_arrival < pending.size() && pending[next_arrival]->arrival <= step &&
           pending[next_arrival]->arrival_s <= clock_s_) {
      Seq* s = pending[next_arrival++];
      // A step arrival counts from the start of its step; a timed one from its time.
      results_[s->req].arrival_s = s->arrival > 0 ? clock_s_ : s->arrival_s;
      waiting_.push_back(s);
    }
    if (running_.empty() && waiting_.empty() && swapped_.empty()) continue;
    Batch batch = schedule(step);
    if (batch.steps.empty()) {
      if (running_.empty() && !swapped_.empty())
        throw std::runtime_error("request " + std::to_string(results_[swapped_.front()->req].id) +
                                 " needs more KV than the whole cache");
      if (running_.empty())
        throw std::runtime_error("request " + std::to_string(results_[waiting_.front()->req].id) + " (" +
                                 std::to_string(waiting_.front()->tokens.size()) +
                                 " tokens) does not fit the KV cache even when it is empty");
      throw std::logic_error("the scheduler made no progress with " + std::to_string(running_.size()) +
                             " sequences running");
    }
    execute(batch, step);
    ++step;
    ++stats_.steps;
  }
  stats_.clock_s = clock_s_;
  return results_;
}

bool InferenceEngine::grow(size_t i, int64_t tokens, int64_t step) {
  Seq* s = running_[i];
  while (!cache_.append_tokens(s->kv_id, tokens)) {
    // No room: preempt the most recently admitted sequence (vLLM's victim), maybe this one.
    const size_t victim = running_.size() - 1;
    if (running_[victim]->scheduled_step == step) return false;  // already in this step's batch
    if (victim == i) {
      if (running_.size() == 1)
        throw std::runtime_error("request " + std::to_string(results_[s->req].id) +
                                 " needs more KV than the whole cache");
      preempt(victim);
      return false;
    }
    preempt(victim);
  }
  return true;
}

void InferenceEngine::preempt(size_t i) {
  Seq* s = running_[i];
  ++stats_.preemptions;
  ++results_[s->req].preemptions;
  if (opt_.swap) {  // its blocks to host memory; it resumes where it stopped
    const int64_t before = opt_.swap->bytes_out();
    opt_.swap->swap_out(static_cast<kv::PagedKvCache&>(cache_), s->kv_id);
    stats_.swap_out_bytes += opt_.swap->bytes_out() - before;
    ++stats_.swap_outs;
    running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
    swapped_.push_back(s);
    return;
  }
  cache_.free_sequence(s->kv_id);
  s->kv_id = -1;
  s->computed = 0;  // recompute: prompt and generated tokens are the new prompt
  running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
  waiting_.insert(waiting_.begin(), s);
}

// Swapped sequences come back first, in the order they left, when their blocks and the
// next token fit (vLLM v0 _schedule_swapped: can_swap_in with room to append).
// A swapped sequence keeps its kv_id as the name of its host copy.
void InferenceEngine::swap_in_waiting() {
  auto& paged = static_cast<kv::PagedKvCache&>(cache_);
  while (!swapped_.empty() && static_cast<int64_t>(running_.size()) < opt_.max_batch) {
    Seq* s = swapped_.front();
    if (!opt_.swap->can_swap_in(paged, s->kv_id, 1)) break;
    const kv::SeqId id = next_kv_id_++;
    const int64_t before = opt_.swap->bytes_in();
    if (!opt_.swap->swap_in(paged, s->kv_id, id)) break;
    stats_.swap_in_bytes += opt_.swap->bytes_in() - before;
    ++stats_.swap_ins;
    s->kv_id = id;
    swapped_.erase(swapped_.begin());
    running_.push_back(s);
  }
}

void InferenceEngine::finish(size_t i, int64_t step) {
  Seq* s = running_[i];
  cache_.free_sequence(s->kv_id);
  s->kv_id = -1;
  InferResult& r = results_[s->req];
  r.tokens.assign(s->tokens.begin() + s->prompt_len, s->tokens.end());
  r.finish_step = step;
  r.finish_s = clock_s_;
  running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
}

void InferenceEngine::add(Batch& b, Seq* s, int64_t n) {
  b.steps.push_back({s->kv_id, n});
  b.tokens.insert(b.tokens.end(), s->tokens.begin() + s->computed, s->tokens.begin() + s->computed + n);
  b.members.push_back(s);
}

bool InferenceEngine::admit(int64_t budget, int64_t step, Batch& batch) {
  Seq* s = waiting_.front();
  const auto size = static_cast<int64_t>(s->tokens.size());
  const auto* paged = dynamic_cast<const kv::PagedKvCache*>(&cache_);
  const bool caching = paged && opt_.prefix_caching && !cache_.slot_cap();
  std::vector<kv::BlockHash> hashes;
  if (caching) hashes = kv::block_hashes(s->tokens, paged->blocks().block_tokens());
  int64_t hit = 0;
  if (!hashes.empty()) {
    if (!paged->blocks().can_allocate(size, hashes)) return false;
    hit = paged->blocks().cached_prefix_blocks(hashes, size - 1) * paged->blocks().block_tokens();
  } else if (!cache_.can_admit(size)) {
    return false;
  }
  int64_t chunk = std::min(size - hit, budget);
  if (cache_.slot_cap()) chunk = std::min(chunk, *cache_.slot_cap());  // a first step never wraps or evicts
  const int64_t len = hit + chunk;
  const kv::SeqId id = next_kv_id_++;
  std::optional<kv::PrefixRef> prefix;
  if (!hashes.empty()) prefix = kv::PrefixRef(std::move(hashes));
  if (!cache_.add_sequence(id, len, std::move(prefix))) return false;
  s->kv_id = id;
  s->prefill_len = size;
  s->computed = cache_.cached_tokens(id);
  if (s->computed != hit)
    throw std::logic_error("prefix cache: " + std::to_string(s->computed) + " tokens hit, " + std::to_string(hit) +
                           " looked up");
  if (caching) stats_.prefix_query_tokens += size;
  stats_.prefix_tokens_shared += hit;
  if (paged) stats_.prefix_hit_blocks += hit / paged->blocks().block_tokens();
  waiting_.erase(waiting_.begin());
  running_.push_back(s);
  stats_.peak_running = std::max<int64_t>(stats_.peak_running, static_cast<int64_t>(running_.size()));
  add(batch, s, chunk);
  s->scheduled_step = step;
  batch.prefill_tokens += chunk;
  return true;
}

// vLLM v1's Scheduler.schedule, with decodes first: (1) one token for each
// running sequence that decodes, (2) the running prefills' chunks, (3)
// admissions — all under max_num_batched_tokens.
InferenceEngine::Batch InferenceEngine::schedule(int64_t step) {
  Batch b;
  if (opt_.swap) swap_in_waiting();
  int64_t budget = opt_.max_num_batched_tokens;
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Seq* s = running_[i];
    if (s->prefilling()) {
      ++i;
      continue;
    }
    if (!grow(i, 1, step)) break;  // preempted itself: it was the newest
    add(b, s, 1);                  // the K/V of the last generated token is computed now
    s->scheduled_step = step;
    ++b.decodes;
    --budget;
    ++i;
  }
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Seq* s = running_[i];
    if (!s->prefilling() || s->scheduled_step == step) {
      ++i;
      continue;
    }
    const int64_t c = std::min({s->prefill_len - s->computed, budget, cache_.max_step_tokens(s->kv_id)});
    if (!grow(i, c, step)) break;
    add(b, s, c);
    s->scheduled_step = step;
    b.prefill_tokens += c;
    budget -= c;
    ++i;
  }
  // New admissions wait while a swapped sequence waits (vLLM v0 schedules
  // prefills only when nothing is swapped out), so it is not starved.
  while (budget > 0 && !waiting_.empty() && swapped_.empty() &&
         static_cast<int64_t>(running_.size()) < opt_.max_batch) {
    const int64_t before = b.prefill_tokens;
    if (!admit(budget, step, b)) break;
    budget -= b.prefill_tokens - before;
  }
  return b;
}

int64_t InferenceEngine::step_kv_bytes(const Batch& b) const {
  // The K/V every sequence attends to: the tokens it holds (its new ones
  // included, written before they are read), every layer of the rank, in the
  // stored dtype with its per-token scales. The weights are added after the
  // forward (InferenceModel::weight_bytes_read: the input embedding only in
  // the rows looked up, a MoE layer's experts only those routed to).
  const int64_t token_bytes = cache_.geometry().token_bytes();
  int64_t bytes = 0;
  for (const auto& st : b.steps) {
    const int64_t len = cache_.length(st.id);
    bytes += (cache_.slot_cap() ? std::min(len, *cache_.slot_cap()) : len) * token_bytes;
  }
  return bytes;
}

void InferenceEngine::execute(Batch& b, int64_t step) {
  StepCost cost;
  cost.tokens = static_cast<int64_t>(b.tokens.size());
  cost.bytes_read = step_kv_bytes(b);
  Device& dev = model_.device();
  const int64_t f0 = dev.executed_flops();
  const double t0 = now_seconds();
  const std::vector<int32_t> next = model_.forward(b.steps, b.tokens, cache_);
  dev.synchronize();
  cost.measured_seconds = now_seconds() - t0;
  cost.flops = dev.executed_flops() - f0;
  const int64_t weight_bytes = model_.weight_bytes_read(b.tokens);
  cost.bytes_read += weight_bytes;
  const double seconds = opt_.step_seconds ? opt_.step_seconds(cost) : cost.measured_seconds;
  clock_s_ += seconds;

  stats_.prefill_tokens += b.prefill_tokens;
  stats_.decode_tokens += b.decodes;
  if (b.prefill_tokens > 0) {
    ++stats_.prefill_steps;
    stats_.mixed_steps += b.decodes > 0 ? 1 : 0;
    stats_.prefill_seconds += seconds;
    stats_.prefill_flops += cost.flops;
  } else {
    ++stats_.decode_steps;
    stats_.decode_step_tokens += b.decodes;
    stats_.decode_seconds += seconds;
    stats_.decode_flops += cost.flops;
    stats_.decode_bytes_read += cost.bytes_read;
    stats_.decode_weight_bytes_read += weight_bytes;
    stats_.decode_experts_routed += model_.experts_routed();
    ++stats_.decode_steps_by_batch[b.decodes];
    stats_.max_decode_batch = std::max(stats_.max_decode_batch, b.decodes);
  }
  StepRecord rec;
  rec.decode_tokens = b.decodes;
  rec.end_s = clock_s_;

  for (size_t j = 0; j < b.members.size(); ++j) {
    Seq* s = b.members[j];
    const bool was_prefill = s->prefilling();
    s->computed += b.steps[j].n_new;
    if (was_prefill && opt_.record_steps) rec.prefill_chunks.emplace_back(results_[s->req].id, b.steps[j].n_new);
    if (s->prefilling()) continue;
    s->tokens.push_back(next[j]);  // a decode's next token, or the last prompt token's: the first
    InferResult& r = results_[s->req];
    if (r.first_token_step < 0) {
      r.first_token_step = step;
      r.first_token_s = clock_s_;
    }
    if (s->generated() == s->gen_len)
      finish(static_cast<size_t>(std::find(running_.begin(), running_.end(), s) - running_.begin()), step);
  }
  if (opt_.record_steps) stats_.step_log.push_back(std::move(rec));
}

// ---- requests ----

std::vector<InferRequest> make_requests(const std::vector<RequestShape>& shapes, int64_t vocab, uint64_t seed,
                                        int64_t prefix_len) {
  const BigramData data(vocab, seed);
  const auto gbs = static_cast<int64_t>(shapes.size());
  std::vector<int32_t> prefix;
  if (prefix_len > 0) {
    prefix.resize(static_cast<size_t>(prefix_len + 1));
    data.sequences(0, gbs, 0, 1, prefix_len, prefix.data());
  }
  std::vector<InferRequest> out;
  for (int64_t i = 0; i < gbs; ++i) {
    const RequestShape& s = shapes[static_cast<size_t>(i)];
    InferRequest r;
    r.id = i;
    r.gen_len = s.gen_len;
    r.arrival = s.arrival;
    r.arrival_s = s.arrival_s;
    r.prompt.resize(static_cast<size_t>(s.prompt_len + 1));
    data.sequences(0, gbs, i, 1, s.prompt_len, r.prompt.data());
    r.prompt.pop_back();
    for (int64_t t = 0; t < std::min(prefix_len, s.prompt_len); ++t)
      r.prompt[static_cast<size_t>(t)] = prefix[static_cast<size_t>(t)];
    out.push_back(std::move(r));
  }
  return out;
}

// ---- KV dtype error ----

KvErrorResult kv_attention_error(Device& device, const kv::KvGeometry& geometry, int64_t q_heads, int64_t context,
                                 int64_t outlier_channels, uint64_t seed) {
  kv::KvGeometry g = geometry;
  g.layers = 1;
  kv::KvGeometry ref = g;
  ref.format = KvFormat::kBF16;
  ref.scales = KvScales::kPerTokenHead;  // bf16 has no scales; per group is int4's alone
  const int64_t B = 16, blocks = (context + B - 1) / B + 1;
  kv::PagedKvCache test(device, g, blocks, B), base(device, ref, blocks, B);
  test.add_sequence(0, context);
  base.add_sequence(0, context);
  const int64_t H = g.kv_heads, D = g.head_dim;
  // N(0, 1) draws (std::mt19937_64: a side run, only its seed matters)
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto draw = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = nd(gen);
    return v;
  };
  std::vector<float> k = draw(H * context * D), v = draw(H * context * D), q = draw(q_heads * D);
  // Outlier key channels, as KIVI / KVQuant observe (a few channels of K far
  // larger than the rest): ×50 in K (Hkv, n, D). The queries do not read them
  // (0 there), so the scores come from the ordinary channels — the ones a
  // per-tensor scale, sized by the outliers, flattens to a few codes.
  const int64_t outliers = std::min(outlier_channels, D);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t t = 0; t < context; ++t)
      for (int64_t d = 0; d < outliers; ++d) k[static_cast<size_t>((h * context + t) * D + d)] *= 50.0f;
  for (int64_t h = 0; h < q_heads; ++h)
    for (int64_t d = 0; d < outliers; ++d) q[static_cast<size_t>(h * D + d)] = 0.0f;
  auto up = [&](const std::vector<float>& x) {
    Buffer b = device.alloc(4 * static_cast<int64_t>(x.size()), Account::kWorkspace, "kv_error.input");
    device.copy_from_host(b.data(), x.data(), 4 * static_cast<int64_t>(x.size()));
    return b;
  };
  Buffer kb = up(k), vb = up(v), qb = up(q);
  Buffer o1 = device.alloc(4 * q_heads * D, Account::kWorkspace, "kv_error.out");
  Buffer o2 = device.alloc(4 * q_heads * D, Account::kWorkspace, "kv_error.ref");
  const std::vector<kv::SeqStep> all{{0, context}}, last{{0, 1}};
  test.write(0, all, kb.data(), vb.data(), DType::kFP32);
  base.write(0, all, kb.data(), vb.data(), DType::kFP32);
  test.attend(0, last, o1.data(), qb.data(), DType::kFP32, q_heads);
  base.attend(0, last, o2.data(), qb.data(), DType::kFP32, q_heads);
  KvErrorResult r;
  if (!device.touches_memory()) return r;
  std::vector<float> a(static_cast<size_t>(q_heads * D)), b(a.size());
  device.copy_to_host(a.data(), o1.data(), 4 * q_heads * D);
  device.copy_to_host(b.data(), o2.data(), 4 * q_heads * D);
  double se = 0, sr = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    se += d * d;
    sr += static_cast<double>(b[i]) * b[i];
    r.max_error = std::max(r.max_error, std::abs(d));
  }
  r.rms_error = std::sqrt(se / static_cast<double>(a.size()));
  r.rms_reference = std::sqrt(sr / static_cast<double>(a.size()));
  return r;
}

}  // namespace gpuledger
