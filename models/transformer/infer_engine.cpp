// InferenceEngine (see infer_engine.h): the scheduler loop, admission,
// chunked prefill, continuous-batching decode, recompute preemption and
// prefix sharing; the KV-dtype error side run (the trace reader is
// request_trace.cpp).
#include "models/transformer/infer_engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>

#include "models/transformer/data.h"

namespace gpuledger {

struct InferenceEngine::Seq {
  size_t req = 0;               // index of its request / result
  std::vector<int32_t> tokens;  // prompt, then the tokens generated so far
  int64_t prompt_len = 0;       // the request's own prompt
  int64_t gen_len = 1;
  int64_t arrival = 0;
  kv::SeqId kv_id = -1;     // while running
  int64_t computed = 0;     // tokens whose K/V are in the cache
  int64_t prefill_len = 0;  // the prompt of this admission (recompute: prompt + generated)
  int64_t generated() const { return static_cast<int64_t>(tokens.size()) - prompt_len; }
  // Decode holds back the last generated token's K/V (the next step computes
  // it), so prefill is "computed < prefill_len", not "< tokens".
  bool prefilling() const { return computed < prefill_len; }
};

InferenceEngine::InferenceEngine(InferenceModel& model, kv::KvCache& cache, EngineOptions options)
    : model_(model), cache_(cache), opt_(options) {
  if (opt_.max_batch < 1) throw std::invalid_argument("max_batch must be >= 1");
  if (opt_.prefill_chunk < 1) throw std::invalid_argument("prefill_chunk must be >= 1");
  if (opt_.prefix_len < 0) throw std::invalid_argument("prefix_len must be >= 0");
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
  const auto* contiguous = dynamic_cast<const kv::ContiguousKvCache*>(&cache_);
  for (size_t i = 0; i < requests.size(); ++i) {
    const InferRequest& r = requests[i];
    if (r.prompt.empty() || r.gen_len < 1)
      throw std::invalid_argument("request " + std::to_string(r.id) + ": needs a prompt and gen_len >= 1");
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
    seqs_.push_back(std::move(s));
    results_[i].id = r.id;
  }
  std::vector<Seq*> pending;  // not yet arrived, by arrival then order
  for (auto& s : seqs_) pending.push_back(&s);
  std::stable_sort(pending.begin(), pending.end(), [](Seq* a, Seq* b) { return a->arrival < b->arrival; });
  size_t next_arrival = 0;

  int64_t step = 0;
  while (next_arrival < pending.size() || !waiting_.empty() || !running_.empty()) {
    while (next_arrival < pending.size() && pending[next_arrival]->arrival <= step)
      waiting_.push_back(pending[next_arrival++]);
    if (running_.empty() && waiting_.empty()) {  // idle until the next arrival
      step = pending[next_arrival]->arrival;
      continue;
    }
    bool prefill = std::any_of(running_.begin(), running_.end(), [](Seq* s) { return s->prefilling(); });
    if (!prefill && !waiting_.empty() && static_cast<int64_t>(running_.size()) < opt_.max_batch)
      prefill = cache_.can_admit(static_cast<int64_t>(waiting_.front()->tokens.size()));
    if (!prefill && running_.empty())
      throw std::runtime_error("request " + std::to_string(results_[waiting_.front()->req].id) + " (" +
                               std::to_string(waiting_.front()->tokens.size()) +
                               " tokens) does not fit the KV cache even when it is empty");
    if (prefill)
      prefill_step(step);
    else
      decode_step(step);
    ++step;
    ++stats_.steps;
  }
  return results_;
}

bool InferenceEngine::grow(size_t i, int64_t tokens) {
  Seq* s = running_[i];
  while (!cache_.append_tokens(s->kv_id, tokens)) {
    // No room: preempt the most recently admitted sequence (vLLM's victim), maybe this one.
    const size_t victim = running_.size() - 1;
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
  cache_.free_sequence(s->kv_id);
  s->kv_id = -1;
  s->computed = 0;  // recompute: prompt and generated tokens are the new prompt
  running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
  waiting_.insert(waiting_.begin(), s);
  ++stats_.preemptions;
  ++results_[s->req].preemptions;
}

void InferenceEngine::finish(size_t i, int64_t step) {
  Seq* s = running_[i];
  cache_.free_sequence(s->kv_id);
  s->kv_id = -1;
  InferResult& r = results_[s->req];
  r.tokens.assign(s->tokens.begin() + s->prompt_len, s->tokens.end());
  r.finish_step = step;
  running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
}

bool InferenceEngine::admit(size_t w, int64_t budget, std::vector<kv::SeqStep>& batch, std::vector<int32_t>& toks) {
  Seq* s = waiting_[w];
  const auto size = static_cast<int64_t>(s->tokens.size());
  if (!cache_.can_admit(size)) return false;
  int64_t chunk = std::min(size, budget);
  if (cache_.window()) chunk = std::min(chunk, *cache_.window());  // a first step never wraps the rolling buffer
  std::optional<kv::PrefixRef> prefix;
  int64_t len = chunk;
  const auto* paged = dynamic_cast<const kv::PagedKvCache*>(&cache_);
  if (paged && opt_.prefix_len > 0 && !cache_.window() && size > 1) {
    for (Seq* src : running_)
      if (src->computed >= opt_.prefix_len) {
        prefix = kv::PrefixRef{src->kv_id, opt_.prefix_len};
        break;
      }
    if (prefix) {
      const int64_t B = paged->blocks().block_tokens();
      const int64_t shared = std::min(opt_.prefix_len, size - 1) / B * B;
      len = std::min(size, shared + chunk);
    }
  }
  const kv::SeqId id = next_kv_id_++;
  if (!cache_.add_sequence(id, len, prefix)) return false;
  s->kv_id = id;
  s->prefill_len = size;
  s->computed = cache_.cached_tokens(id);
  stats_.prefix_tokens_shared += s->computed;
  batch.push_back({id, len - s->computed});
  toks.insert(toks.end(), s->tokens.begin() + s->computed, s->tokens.begin() + len);
  waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(w));
  running_.push_back(s);
  stats_.peak_running = std::max<int64_t>(stats_.peak_running, static_cast<int64_t>(running_.size()));
  return true;
}

void InferenceEngine::prefill_step(int64_t step) {
  int64_t budget = opt_.prefill_chunk;
  std::vector<kv::SeqStep> batch;
  std::vector<int32_t> toks;
  std::vector<Seq*> members;
  // 1. running prefills, oldest first (a preemption only takes newer ones, not yet in the batch)
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Seq* s = running_[i];
    if (!s->prefilling()) {
      ++i;
      continue;
    }
    const int64_t c = std::min({s->prefill_len - s->computed, budget, cache_.max_step_tokens(s->kv_id)});
    if (!grow(i, c)) break;  // it was the newest and preempted itself
    batch.push_back({s->kv_id, c});
    toks.insert(toks.end(), s->tokens.begin() + s->computed, s->tokens.begin() + s->computed + c);
    members.push_back(s);
    budget -= c;
    ++i;
  }
  // 2. admissions, first come first served
  while (budget > 0 && !waiting_.empty() && static_cast<int64_t>(running_.size()) < opt_.max_batch) {
    const size_t before = batch.size();
    if (!admit(0, budget, batch, toks)) break;
    members.push_back(running_.back());
    budget -= batch[before].n_new;
  }
  if (batch.empty()) return;

  Device& dev = model_.device();
  const int64_t f0 = dev.executed_flops();
  const double t0 = now_seconds();
  const std::vector<int32_t> next = model_.forward(batch, toks, cache_);
  dev.synchronize();
  stats_.prefill_seconds += now_seconds() - t0;
  stats_.prefill_flops += dev.executed_flops() - f0;
  stats_.prefill_tokens += static_cast<int64_t>(toks.size());
  ++stats_.prefill_steps;

  for (size_t j = 0; j < members.size(); ++j) {
    Seq* s = members[j];
    s->computed += batch[j].n_new;
    if (s->prefilling()) continue;
    s->tokens.push_back(next[j]);  // the last prompt token's logits: the next token
    InferResult& r = results_[s->req];
    if (r.first_token_step < 0) r.first_token_step = step;
    if (s->generated() == s->gen_len) {
      finish(static_cast<size_t>(std::find(running_.begin(), running_.end(), s) - running_.begin()), step);
    }
  }
}

void InferenceEngine::decode_step(int64_t step) {
  std::vector<kv::SeqStep> batch;
  std::vector<int32_t> toks;
  std::vector<Seq*> members;
  for (size_t i = 0; i < running_.size();) {
    Seq* s = running_[i];
    if (!grow(i, 1)) break;  // preempted itself: it was the newest
    // the K/V of the last generated token is computed now
    batch.push_back({s->kv_id, 1});
    toks.push_back(s->tokens.back());
    members.push_back(s);
    ++i;
  }
  if (batch.empty()) return;
  const int64_t token_bytes = cache_.geometry().token_bytes();
  int64_t bytes = model_.weights().bytes();
  for (const auto& b : batch) {
    const int64_t len = cache_.length(b.id);
    bytes += (cache_.window() ? std::min(len, *cache_.window()) : len) * token_bytes;
  }

  Device& dev = model_.device();
  const int64_t f0 = dev.executed_flops();
  const double t0 = now_seconds();
  const std::vector<int32_t> next = model_.forward(batch, toks, cache_);
  dev.synchronize();
  stats_.decode_seconds += now_seconds() - t0;
  stats_.decode_flops += dev.executed_flops() - f0;
  stats_.decode_tokens += static_cast<int64_t>(batch.size());
  stats_.decode_bytes_read += bytes;
  stats_.max_decode_batch = std::max<int64_t>(stats_.max_decode_batch, static_cast<int64_t>(batch.size()));
  ++stats_.decode_steps;

  for (size_t j = 0; j < members.size(); ++j) {
    Seq* s = members[j];
    s->computed += 1;
    s->tokens.push_back(next[j]);
    if (s->generated() == s->gen_len)
      finish(static_cast<size_t>(std::find(running_.begin(), running_.end(), s) - running_.begin()), step);
  }
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
