// CSV reading for the datasets (small files: read whole, split by line and comma).
#include "csv.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

namespace emo::model::detail {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// Splits one line; "a,\"b,c\",d" -> a | b,c | d ("" inside quotes is a literal quote).
std::vector<std::string> split(std::string_view line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cur += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.emplace_back(trim(cur));
  return out;
}

}  // namespace

int CsvTable::column(std::string_view name) const {
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == name) return static_cast<int>(i);
  }
  return -1;
}

std::string CsvTable::where(size_t row) const { return path + ":line " + std::to_string(lines[row]); }

Result<CsvTable> read_csv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(path, std::string("cannot read: ") + std::strerror(errno));
  CsvTable t;
  t.path = path;
  std::string line;
  size_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (trim(line).empty()) continue;
    if (lineno == 1 && line.size() >= 3 && line.compare(0, 3, "\xEF\xBB\xBF") == 0) line.erase(0, 3);  // BOM
    auto fields = split(line);
    if (t.header.empty()) {
      t.header = std::move(fields);
      continue;
    }
    if (fields.size() != t.header.size()) {
      return make_error(path + ":line " + std::to_string(lineno),
                        "expected " + std::to_string(t.header.size()) + " fields (as in the header), got " +
                            std::to_string(fields.size()));
    }
    t.rows.push_back(std::move(fields));
    t.lines.push_back(lineno);
  }
  if (t.header.empty()) return make_error(path, "empty file (no header line)");
  return t;
}

Result<double> number_at(const CsvTable& t, size_t row, int col) {
  const std::string& s = t.rows[row][static_cast<size_t>(col)];
  std::string where = t.where(row);
  std::string name = "column '" + t.header[static_cast<size_t>(col)] + "'";
  if (s.empty()) return make_error(where, name + ": empty");
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v))
    return make_error(where, name + ": not a number: '" + s + "'");
  return v;
}

}  // namespace emo::model::detail
