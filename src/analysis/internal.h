// Pieces shared by the analysis's source files (not part of the library's interface).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "emo/analysis/topology.h"
#include "emo/base/result.h"
#include "emo/dist/dist.h"

namespace emo::analysis {
struct LoadOptions;
struct WorkloadPart;
}

namespace emo::analysis::detail {

// Intervals sorted and joined where they overlap: a GPU's busy time from its ops' [start, end).
using Intervals = std::vector<std::pair<int64_t, int64_t>>;
Intervals merged_intervals(Intervals iv);

// topology_durations() over the processes of a run (what_if_part with a topology): durations for this
// process's part; the report joined on process 0 (the others' hold their own collectives only).
Result<TopologyWhatIf> topology_durations_part(const WorkloadPart& w, const Topology& asked, const Topology* recorded,
                                               dist::Comm& comm);

// without_profiler_cost() over the processes of a run (load_part with options.deprofile; every process calls
// it): the same factor from replays shared by the processes, each process's ranks written back at it and
// the parts built again; `w` as it is where one process leaves the step as it is.
Result<WorkloadPart> without_profiler_cost_part(WorkloadPart w, const LoadOptions& options, dist::Comm& comm);

}  // namespace emo::analysis::detail
