// Plain text tables (see table.h).
#include "bench/report/table.h"

#include <algorithm>

namespace gpuledger::report {

Table& Table::columns(std::vector<std::string> names) {
  columns_ = std::move(names);
  return *this;
}
Table& Table::row(std::vector<std::string> cells) {
  cells.resize(std::max(cells.size(), columns_.size()));
  rows_.push_back(std::move(cells));
  return *this;
}
Table& Table::rule() {
  rows_.emplace_back();
  return *this;
}
Table& Table::note(std::string text) {
  notes_.push_back(std::move(text));
  return *this;
}

namespace {
// Display width: count UTF-8 code points, not bytes (Ψ, ×, ≤ are multibyte).
size_t width(const std::string& s) {
  size_t w = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++w;
  return w;
}
std::string pad(const std::string& s, size_t w, bool left) {
  const size_t n = width(s);
  if (n >= w) return s;
  return left ? s + std::string(w - n, ' ') : std::string(w - n, ' ') + s;
}
}  // namespace

std::string Table::render() const {
  size_t ncol = columns_.size();
  for (const auto& r : rows_) ncol = std::max(ncol, r.size());
  std::vector<size_t> w(ncol, 0);
  for (size_t i = 0; i < columns_.size(); ++i) w[i] = width(columns_[i]);
  for (const auto& r : rows_)
    for (size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], width(r[i]));
  size_t total = 0;
  for (auto x : w) total += x + 2;

  std::string out;
  if (!title_.empty()) out += "# " + title_ + "\n";
  auto line = [&](const std::vector<std::string>& cells, const std::string& prefix) {
    std::string l = prefix;
    for (size_t i = 0; i < ncol; ++i) {
      const std::string c = i < cells.size() ? cells[i] : "";
      l += pad(c, w[i], i == 0) + (i + 1 < ncol ? "  " : "");
    }
    while (!l.empty() && l.back() == ' ') l.pop_back();
    out += l + "\n";
  };
  if (!columns_.empty()) line(columns_, "# ");
  for (const auto& r : rows_) {
    if (r.empty()) {
      out += "  " + std::string(total > 2 ? total - 2 : 0, '-') + "\n";
      continue;
    }
    line(r, "  ");
  }
  for (const auto& n : notes_) out += "# " + n + "\n";
  return out;
}

}  // namespace gpuledger::report
