// Repetitions of one train point in one report (see train_repeats.h).
#include "bench/report/train_repeats.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "bench/report/checks.h"

namespace gpuledger::report {

using nlohmann::json;

namespace {

// What must not change between repetitions: every rank's peak bytes by account and the losses.
json invariant_part(const json& doc) {
  json v = {{"loss", doc["summary"].value("loss", json::array())}, {"ranks", json::array()}};
  for (const auto& r : doc.value("ranks", json::array()))
    v["ranks"].push_back(r.contains("measured") ? r["measured"].value("peak_by_account", json()) : json());
  return v;
}

}  // namespace

json combine_repeats(const std::vector<json>& docs) {
  if (docs.empty()) throw std::invalid_argument("combine_repeats: no repetitions");
  for (const auto& d : docs)
    if (d.value("status", "ok") != "ok") return d;
  if (docs.size() == 1) return docs.front();
  std::vector<size_t> order(docs.size());
  std::iota(order.begin(), order.end(), 0);
  auto ms = [&](size_t i) { return docs[i]["summary"].value("median_step_ms", 0.0); };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ms(a) < ms(b); });
  json doc = docs[order[(docs.size() - 1) / 2]];
  json repeats = json::array();
  const json first = invariant_part(docs.front());
  for (size_t i = 0; i < docs.size(); ++i) {
    const json& s = docs[i]["summary"];
    repeats.push_back({{"mfu", s.value("mfu", json())},
                       {"hfu", s.value("hfu", json())},
                       {"tokens_per_s", s.value("tokens_per_s", json())},
                       {"median_step_ms", s.value("median_step_ms", json())}});
    if (i == 0) continue;
    const bool same = invariant_part(docs[i]) == first;
    json chk = bench::make_check("repeat.same_bytes_and_loss", -1, same ? 1 : 0, 1, 0);
    chk["note"] = "repetition " + std::to_string(i + 1) + " against the first";
    doc["checks"].push_back(chk);
  }
  doc["summary"]["repeats"] = repeats;
  return doc;
}

}  // namespace gpuledger::report
