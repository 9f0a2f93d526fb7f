// A plain text table: a title, column headers, right-aligned cells (left for
// the first column), '#'-prefixed header lines as nccl-tests prints them.
#pragma once
#include <string>
#include <vector>

namespace gpuledger::report {

class Table {
 public:
  explicit Table(std::string title = {}) : title_(std::move(title)) {}
  Table& columns(std::vector<std::string> names);
  Table& row(std::vector<std::string> cells);
  Table& rule();                  // a separator line before the next row
  Table& note(std::string text);  // a '#' line printed after the table
  std::string render() const;

 private:
  std::string title_;
  std::vector<std::string> columns_;
  std::vector<std::vector<std::string>> rows_;  // an empty row = rule
  std::vector<std::string> notes_;
};

}  // namespace gpuledger::report
