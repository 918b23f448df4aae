// Collectives matched across ranks from compact records of each rank's communication kernels: the one
// rule the graph builder uses, and that processes holding different ranks can apply to the records they
// exchange (DESIGN.md §9, docs/mpi.md). Pure: no graph, no trace.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace emo::graph {

// One communication kernel of one rank, as the matching needs it.
struct CommRecord {
  uint32_t rank = 0;         // the rank's position in the step (RankIndex)
  std::string process_group;
  std::string collective;    // its kind: allreduce, send, recv, ...
  int64_t seq = -1;          // the process group's sequence number; -1 when the trace has none
  bool matchable = true;     // false: no metadata says which peer kernels it goes with (kept whole)
  int32_t group_size = 0;    // as the trace declares it; 0 when unknown
  int64_t start_ns = 0;      // measured, on the common timeline, before the ranks' clocks are aligned
  int64_t end_ns = 0;
};

struct MatchedCollective {
  std::vector<uint32_t> members;  // indexes of the records, one per rank, in record order
  int64_t start_ns = 0;           // the last member's arrival, on the aligned timeline
  int64_t end_ns = 0;             // the first member's end, on the aligned timeline
};

struct CollectiveMatch {
  std::vector<int64_t> offsets;   // per rank: the clock offset to remove (rank 0's is 0)
  std::vector<uint8_t> aligned;   // per rank: its clock was aligned by matched collectives (rank 0 always)
  std::vector<MatchedCollective> collectives;  // in the order of their keys (process group, seq or kind and
                                               // occurrence)
  int64_t unmatched = 0;          // kernels left whole
  int64_t inconsistent = 0;       // collectives whose members disagree (BuildStats::collectives_inconsistent)
  std::string inconsistent_example;
};

// Matches `records` (in rank order, each rank's in its kernels' order) of a step of `ranks` ranks, whose
// rank numbers are `rank_ids` (for the example): kernels of one process group with one sequence number, or
// else the k-th of one kind, are one collective; each rank's clock offset is the median of its members'
// end less rank 0's; a collective whose members' aligned spans do not overlap stays unmatched.
CollectiveMatch match_collectives(const std::vector<CommRecord>& records, size_t ranks,
                                  const std::vector<int>& rank_ids);

}  // namespace emo::graph
