// Minimal CSV reading for the DVFS datasets: a header line, then rows of the same width. Quoted
// fields ("a,b") are unquoted; blank lines are skipped; each row remembers its line for errors.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "emo/base/result.h"

namespace emo::model::detail {

struct CsvTable {
  std::string path;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<size_t> lines;  // 1-based line of each row

  // Index of a header column (exact match after trimming), or -1.
  int column(std::string_view name) const;
  // "FILE:line N"
  std::string where(size_t row) const;
};

Result<CsvTable> read_csv(const std::string& path);

// A finite number; an empty or malformed field -> Error "FILE:line N: column 'C': ...".
Result<double> number_at(const CsvTable& t, size_t row, int col);

}  // namespace emo::model::detail
