// Pieces shared by the analysis's source files (not part of the library's interface).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace emo::analysis::detail {

// Intervals sorted and joined where they overlap: a GPU's busy time from its ops' [start, end).
using Intervals = std::vector<std::pair<int64_t, int64_t>>;
Intervals merged_intervals(Intervals iv);

}  // namespace emo::analysis::detail
