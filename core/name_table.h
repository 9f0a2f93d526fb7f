// An enum's names as a constant table of (value, name) pairs, looked up both
// ways: one place for the two loops every such table needs.
#pragma once
#include <array>
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <utility>

namespace gpuledger {

template <typename E, std::size_t N>
using NameTable = std::array<std::pair<E, std::string_view>, N>;

// The name of `e`; throws std::logic_error when the table misses it (a bug).
template <typename E, std::size_t N>
std::string_view name_in(const NameTable<E, N>& table, E e) {
  for (const auto& [value, name] : table)
    if (value == e) return name;
  throw std::logic_error("a value missing from its name table");
}

// The value named `name`, or nullopt.
template <typename E, std::size_t N>
std::optional<E> value_in(const NameTable<E, N>& table, std::string_view name) {
  for (const auto& [value, n] : table)
    if (n == name) return value;
  return std::nullopt;
}

}  // namespace gpuledger
