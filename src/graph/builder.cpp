// Builds the dependency graph of a step from the ranks' event tables.
//
// CPU threads become chains of segments: the thread's time is cut at every
// event boundary and each piece belongs to the innermost event covering it
// (a cpu_op's self time, a runtime call, or a gap no event explains). GPU ops
// are nodes on their stream's chain. Then the edges of DESIGN.md §2 are added,
// and each edge gets the latency that reproduces the measured trace: the edge
// that bound a point in the trace keeps its measured gap; the others get the
// latency their kind inherently has (the median of the binding gaps of that
// kind), never more than their own measured gap. Example: a kernel whose
// launch started at 100 µs, queued behind a kernel ending at 180 µs, starting
// at 181 µs: the stream edge binds (lat 1 µs); the launch edge gets the
// rank's typical empty-queue launch latency (say 6 µs), not the 81 µs queue.
//
// Host waits (docs/replay.md): a blocked-wait frame's time is a wait
// (kCpuWait), not CPU work; a host polling loop ends when the GPU op it polls
// ends (a sync edge); a thread that only waits is replayed but does not bound
// the step (Graph::on_waiting_thread).
#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>

#include <fmt/format.h>

#include "emo/base/stats.h"
#include "emo/graph/collectives.h"
#include "emo/dist/dist.h"
#include "emo/graph/graph.h"
#include "emo/graph/part.h"
#include "emo/graph/waits.h"
#include "emo/trace/runtime_calls.h"

namespace emo::graph {
namespace {

// A launch call this much longer than the rank's typical one (its upper median), and at least
// kSlowLaunchMinNs, is a slow launch: host time the op it launched waits for (add_launch_edges).
constexpr int64_t kSlowLaunchMultiple = 10;
constexpr int64_t kSlowLaunchMinNs = 50'000;

using trace::Event;
using trace::EventKind;
using trace::RankTrace;
using trace::SyncKind;

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMaxI = std::numeric_limits<int64_t>::max();
// Message tags of build_part (the reading's are 10 and 11, the distributed replay's 20 to 22).
constexpr int kTagCounts = 40;
constexpr int kTagRecords = 41;
constexpr int kTagReply = 42;
constexpr int kTagMedians = 43;
constexpr int kTagLatencies = 44;
constexpr int kTagReduce = 45;
constexpr const char* kAlignNote = "ranks without a collective matched across ranks were aligned at their first event";
std::string improper_note(int64_t n) {
  return std::to_string(n) + " CPU events overlapped their parent or a runtime call and were clipped";
}
// The counts a part adds up, and the examples where the first part that has one gives it (build_part).
constexpr int64_t BuildStats::* kSummed[] = {
    &BuildStats::gpu_ops_without_launch, &BuildStats::edges_dropped_inconsistent,
    &BuildStats::collectives_matched, &BuildStats::collectives_unmatched, &BuildStats::collectives_inconsistent,
    &BuildStats::cross_stream_from_sync_events, &BuildStats::cross_stream_from_runtime_pairs,
    &BuildStats::cross_stream_inferred, &BuildStats::waiting_threads, &BuildStats::waiting_thread_nodes,
    &BuildStats::wait_frames, &BuildStats::wait_frame_ns, &BuildStats::poll_query_loops, &BuildStats::poll_ranges,
    &BuildStats::poll_wait_ns, &BuildStats::thread_flow_edges, &BuildStats::thread_waits,
    &BuildStats::thread_wait_ns, &BuildStats::thread_waits_without_flows, &BuildStats::queued_waits};
constexpr std::string BuildStats::* kFirstExample[] = {
    &BuildStats::collectives_inconsistent_example, &BuildStats::waiting_thread_example,
    &BuildStats::wait_frame_example, &BuildStats::poll_example, &BuildStats::thread_wait_example};
// A dependency contradicted by more than this is dropped (clock noise between
// the CPU and GPU timestamps of one trace is ~1 µs).
constexpr int64_t kContradictionToleranceNs = 2000;
constexpr int32_t kInferStream = -2;  // "find the recording stream from the timeline"
// A polling loop or a childless range "ends just after a GPU op ends" when that
// op ended at most this long before it (a poll's interval plus its wake-up).
constexpr int64_t kPollToleranceNs = 50'000;
// A childless annotated range shorter than this is not taken for a spin-wait:
// with a tolerance of 50 µs, a shorter range would "end just after" nearly any op
// that ended while it ran.
constexpr int64_t kPollMinRangeNs = 2 * kPollToleranceNs;

struct RankIndex {
  // correlation -> runtime/driver node of this rank
  std::unordered_map<int64_t, NodeId> runtime_by_corr;
  // (correlation, GPU op) sorted by correlation: a cudaGraphLaunch covers many ops.
  std::vector<std::pair<int64_t, NodeId>> gpu_by_corr;
  // GPU ops launched by `corr`, as a [first, last) range of gpu_by_corr.
  std::pair<const std::pair<int64_t, NodeId>*, const std::pair<int64_t, NodeId>*> gpu_ops_of(int64_t corr) const {
    auto lo = std::lower_bound(gpu_by_corr.begin(), gpu_by_corr.end(), std::make_pair(corr, NodeId{0}));
    auto hi = lo;
    while (hi != gpu_by_corr.end() && hi->first == corr) ++hi;
    return {gpu_by_corr.data() + (lo - gpu_by_corr.begin()), gpu_by_corr.data() + (hi - gpu_by_corr.begin())};
  }
  // device -> stream -> GPU op nodes in stream order, with their launch correlation
  struct StreamOps {
    std::vector<NodeId> nodes;
    std::vector<int64_t> corr;  // launch correlation, kNone when unknown
    // Running maximum of corr: non-decreasing, so "launched before/after a
    // correlation" is a binary search (correlations grow in launch order).
    std::vector<int64_t> key;
  };
  std::vector<NodeId> runtime_nodes;  // in node order, for deterministic edge order
  std::map<std::pair<int32_t, int32_t>, StreamOps> streams;
  std::vector<uint32_t> sync_events;  // indices of cuda_sync events
};

// The CPU nodes of one thread: node ids [first, end) (a thread's nodes are added together).
struct CpuLaneNodes {
  uint32_t rank = 0;
  uint32_t lane = 0;  // graph lane
  NodeId first = 0;
  NodeId end = 0;
};

// An outermost blocked-wait frame (one not inside another).
struct OuterWait {
  uint32_t rank = 0;
  uint32_t lane = 0;  // graph lane
  uint32_t event = 0;
};

double ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

class Builder {
 public:
  Builder(const std::vector<RankTrace>& ranks, const BuildOptions& options, dist::Comm* comm = nullptr)
      : ranks_(ranks), options_(options), comm_(comm) {}

  Result<Graph> build() {
    if (ranks_.empty()) return make_error("", "no trace given");
    idx_.resize(ranks_.size());
    rank_base_.resize(ranks_.size(), 0);
    int64_t min_origin = kMaxI;
    for (const auto& t : ranks_) min_origin = std::min(min_origin, t.origin_ns);
    compute_rank_bases(min_origin);
    for (uint32_t r = 0; r < ranks_.size(); ++r) {
      g_.rank_paths.push_back(ranks_[r].path);
      g_.rank_ids.push_back(ranks_[r].rank >= 0 ? ranks_[r].rank : static_cast<int>(r));
      name_map_.emplace_back(ranks_[r].strings.size(), kNoId);
      add_cpu_nodes(r);
      add_gpu_nodes(r);
    }
    if (g_.num_nodes() == 0) return empty_step();
    add_rank_edges();
    if (options_.split_collectives) add_collectives();
    align_ranks_without_collectives();
    if (options_.split_collectives) count_rank_groups();
    count_waiting_span();
    EMO_RETURN_IF_ERROR(assign_latencies());
    find_gpu_tail_loop();
    EMO_RETURN_IF_ERROR(finish_csr_and_topo());
    return std::move(g_);
  }

  // ---------- one process's part (build_part) ----------
  Result<GraphPart> build_part() {
    const int me = comm_->rank(), P = comm_->size();
    idx_.resize(ranks_.size());
    rank_base_.resize(ranks_.size(), 0);
    // The earliest clock origin, and where this part's ranks sit among every process's.
    int64_t origin = kMaxI;
    for (const auto& t : ranks_) origin = std::min(origin, t.origin_ns);
    auto heads = dist::all_combine(*comm_, kTagCounts, {origin, int64_t(ranks_.size())}, concat_parts);
    if (!heads) return heads.error();
    if (heads->size() != 2 * size_t(P)) return make_error("", "the ranks' counts arrived cut short");
    int64_t min_origin = kMaxI;
    for (int q = 0; q < P; ++q) {
      min_origin = std::min(min_origin, (*heads)[2 * q]);
      if (q < me) first_rank_ += size_t((*heads)[2 * q + 1]);
      total_ranks_ += size_t((*heads)[2 * q + 1]);
    }
    if (total_ranks_ == 0) return make_error("", "no trace given");
    compute_rank_bases(min_origin);
    for (uint32_t r = 0; r < ranks_.size(); ++r) {
      g_.rank_paths.push_back(ranks_[r].path);
      g_.rank_ids.push_back(ranks_[r].rank >= 0 ? ranks_[r].rank : static_cast<int>(first_rank_ + r));
      name_map_.emplace_back(ranks_[r].strings.size(), kNoId);
      add_cpu_nodes(r);
      add_gpu_nodes(r);
    }
    // Every process's node and lane counts: this part's ids in the whole graph.
    auto counts = dist::all_combine(*comm_, kTagCounts, {int64_t(g_.num_nodes()), int64_t(g_.lanes.size())},
                                    concat_parts);
    if (!counts) return counts.error();
    if (counts->size() != 2 * size_t(P)) return make_error("", "the nodes' counts arrived cut short");
    node_base_of_.assign(size_t(P) + 1, 0);
    for (int q = 0; q < P; ++q) {
      node_base_of_[size_t(q) + 1] = node_base_of_[size_t(q)] + size_t((*counts)[2 * q]);
      if (q < me) lane_base_ += size_t((*counts)[2 * q + 1]);
      total_lanes_ += size_t((*counts)[2 * q + 1]);
    }
    total_rank_nodes_ = node_base_of_.back();
    if (total_rank_nodes_ == 0) return empty_step();
    const NodeId rank_nodes = static_cast<NodeId>(g_.num_nodes());
    add_rank_edges();
    global_.resize(rank_nodes);
    std::iota(global_.begin(), global_.end(), static_cast<NodeId>(node_base_of_[size_t(me)]));
    EMO_RETURN_IF_ERROR(match_across_parts());
    EMO_RETURN_IF_ERROR(assign_latencies());
    EMO_RETURN_IF_ERROR(exchange_remote_latencies());
    const Status local = finish_csr_and_topo();
    EMO_RETURN_IF_ERROR(reduce_parts(local));
    GraphPart out;
    out.process = me;
    out.processes = P;
    out.first_rank = first_rank_;
    out.total_ranks = total_ranks_;
    out.total_nodes = total_rank_nodes_ + size_t(collectives_total_);
    out.lane_base = lane_base_;
    out.total_lanes = total_lanes_;
    out.global = std::move(global_);
    for (const Remote& r : remote_) out.remote.push_back(r.edge);
    out.queued_loop = queued_loop_;
    out.graph = std::move(g_);
    return out;
  }

 private:
  Error empty_step() const {
    return make_error(ranks_.empty() ? std::string() : ranks_[0].path, "the step has no CPU or GPU events to analyze",
                      "check --step, or that the trace was recorded with CUDA activities on");
  }
  // Each rank's own edges, then the threads that only wait.
  void add_rank_edges() {
    for (uint32_t r = 0; r < ranks_.size(); ++r) {
      add_launch_edges(r);
      add_cross_stream_edges(r);
      add_sync_edges(r);
      add_poll_waits(r);
      add_thread_flows(r);
      add_engine_waits(r);
    }
    mark_waiting_threads();
  }
  static std::vector<int64_t> concat_parts(const std::vector<std::vector<int64_t>>& parts) {
    std::vector<int64_t> all;
    for (const auto& v : parts) all.insert(all.end(), v.begin(), v.end());
    return all;
  }
  PointId global_point(PointId local) const { return 2 * global_[node_of(local)] + (local & 1u); }

  // Each rank's first start and last end over the nodes that count for the span (kMaxI / kMin: none).
  std::pair<std::vector<int64_t>, std::vector<int64_t>> rank_extents() const {
    std::vector<int64_t> first(ranks_.size(), kMaxI), last(ranks_.size(), kMin);
    for (NodeId n = 0; n < g_.num_nodes(); ++n) {
      if (!g_.counts_for_span(n) || g_.rank[n] >= ranks_.size()) continue;
      first[g_.rank[n]] = std::min(first[g_.rank[n]], g_.meas_start_ns[n]);
      last[g_.rank[n]] = std::max(last[g_.rank[n]], g_.meas_end_ns[n]);
    }
    return {std::move(first), std::move(last)};
  }

  // This part's records (each rank's number and first start, one record per communication kernel) go to
  // process 0, which matches every part's as add_collectives() matches the whole graph's and aligns the
  // ranks as align_ranks_without_collectives() does; each process gets back its ranks' offsets, its
  // kernels' collectives and the collectives it owns (its first member's).
  Status match_across_parts() {
    std::vector<int64_t> ints{int64_t(ranks_.size())};
    const auto firsts = rank_extents().first;
    for (uint32_t r = 0; r < ranks_.size(); ++r) ints.insert(ints.end(), {int64_t(g_.rank_ids[r]), firsts[r]});
    std::vector<NodeId> node_of_record;
    std::vector<std::string> names;
    std::vector<int64_t> recs;
    if (options_.split_collectives) {
      for (NodeId n = 0; n < g_.num_nodes(); ++n) {
        if (g_.kind[n] != NodeKind::kCommKernel) continue;
        const RankTrace& t = ranks_[g_.rank[n]];
        const trace::CollectiveArgs& ca = t.collectives[t.events[g_.event[n]].collective];
        recs.insert(recs.end(), {int64_t(first_rank_ + g_.rank[n]), int64_t(n), ca.seq, ca.matchable ? 1 : 0,
                                 ca.group_size, g_.meas_start_ns[n], g_.meas_end_ns[n]});
        names.emplace_back(t.strings.view(ca.process_group));
        names.emplace_back(t.strings.view(ca.collective));
        node_of_record.push_back(n);
      }
    }
    ints.push_back(int64_t(node_of_record.size()));
    ints.insert(ints.end(), recs.begin(), recs.end());
    const std::string head = dist::to_bytes(ints);
    std::vector<std::string_view> fields{head};
    fields.insert(fields.end(), names.begin(), names.end());
    std::string mine = dist::frame(fields);
    std::vector<int64_t> reply;
    if (!comm_->is_root()) {
      EMO_RETURN_IF_ERROR(comm_->send(dist::kRoot, kTagRecords, std::move(mine)));
      auto m = comm_->recv(dist::kRoot, kTagReply, dist::timeout_s());
      if (!m) return m.error();
      auto v = dist::from_bytes(*m, dist::kRoot);
      if (!v) return v.error();
      reply = std::move(*v);
    } else {
      std::vector<std::string> msgs{std::move(mine)};
      for (int q = 1; q < comm_->size(); ++q) {
        auto m = comm_->recv(q, kTagRecords, dist::timeout_s());
        if (!m) return m.error();
        msgs.push_back(std::move(*m));
      }
      auto replies = match_at_root(msgs);
      if (!replies) return replies.error();
      for (int q = 1; q < comm_->size(); ++q) {
        EMO_RETURN_IF_ERROR(comm_->send(q, kTagReply, dist::to_bytes((*replies)[size_t(q)])));
      }
      reply = std::move((*replies)[0]);
    }
    return apply_reply(reply, node_of_record);
  }

  // Process 0: every part's records, matched; each process's reply (see apply_reply for its layout).
  Result<std::vector<std::vector<int64_t>>> match_at_root(const std::vector<std::string>& msgs) {
    const size_t P = msgs.size();
    std::vector<int> rank_ids;
    std::vector<int64_t> first;
    std::vector<CommRecord> records;
    std::vector<int32_t> rec_proc;
    std::vector<int64_t> rec_gid;
    std::vector<size_t> rank_begin{0}, rec_begin{0};
    for (size_t q = 0; q < P; ++q) {
      const Error cut = make_error("", fmt::format("the collectives' records of process {} arrived cut short", q));
      auto fields = dist::unframe(msgs[q]);
      if (!fields || fields->empty()) return cut;
      auto ints = dist::from_bytes((*fields)[0], int(q));
      if (!ints || ints->empty()) return cut;
      const std::vector<int64_t>& v = *ints;
      const auto k = size_t(v[0]);
      if (v[0] < 0 || k > v.size() || v.size() < 2 + 2 * k) return cut;
      for (size_t r = 0; r < k; ++r) {
        rank_ids.push_back(int(v[1 + 2 * r]));
        first.push_back(v[2 + 2 * r]);
      }
      const size_t at = 1 + 2 * k;
      const auto n = size_t(v[at]);
      if (v[at] < 0 || n > v.size() || v.size() != at + 1 + 7 * n || fields->size() != 1 + 2 * n) return cut;
      for (size_t i = 0; i < n; ++i) {
        const int64_t* c = v.data() + at + 1 + 7 * i;
        CommRecord rec;
        rec.rank = uint32_t(c[0]);
        rec.process_group = std::string((*fields)[1 + 2 * i]);
        rec.collective = std::string((*fields)[2 + 2 * i]);
        rec.seq = c[2];
        rec.matchable = c[3] != 0;
        rec.group_size = int32_t(c[4]);
        rec.start_ns = c[5];
        rec.end_ns = c[6];
        records.push_back(std::move(rec));
        rec_proc.push_back(int32_t(q));
        rec_gid.push_back(int64_t(node_base_of_[q]) + c[1]);
      }
      rank_begin.push_back(rank_ids.size());
      rec_begin.push_back(records.size());
    }
    const size_t R = total_ranks_;
    if (rank_ids.size() != R) return make_error("", "the processes disagree on the number of ranks");
    const bool multi = R >= 2, split = options_.split_collectives;
    CollectiveMatch match;
    if (split) {
      match = match_collectives(records, R, rank_ids);
      g_.stats.collectives_unmatched += match.unmatched;
      g_.stats.collectives_inconsistent += match.inconsistent;
      g_.stats.collectives_inconsistent_example = match.inconsistent_example;
    }
    if (!multi || !split) {
      match.offsets.assign(R, 0);
      match.aligned.assign(R, 0);
      match.collectives.clear();
    }
    // Ranks no collective aligned start with rank 0 (their collectives' offsets are 0: `first` stands).
    std::vector<int64_t> align(R, 0);
    for (size_t r = 1; multi && r < R; ++r) {
      if (match.aligned[r] || first[r] == kMaxI || first[0] == kMaxI) continue;
      align[r] = first[r] - first[0];
      align_note_ = true;
    }
    std::vector<int64_t> coll_of(records.size(), -1);
    std::vector<uint32_t> joined(R);
    std::iota(joined.begin(), joined.end(), 0u);
    const auto find = [&](uint32_t r) {
      while (joined[r] != r) r = joined[r] = joined[joined[r]];
      return r;
    };
    for (size_t ci = 0; ci < match.collectives.size(); ++ci) {
      for (uint32_t i : match.collectives[ci].members) coll_of[i] = int64_t(ci);
      const uint32_t a = find(records[match.collectives[ci].members[0]].rank);
      for (uint32_t i : match.collectives[ci].members) {
        const uint32_t b = find(records[i].rank);
        if (a != b) joined[std::max(a, b)] = std::min(a, b);
      }
    }
    if (split && multi) g_.stats.collectives_matched = int64_t(match.collectives.size());
    const auto offset = [&](uint32_t r) { return match.offsets[r] + align[r]; };
    const auto c_start = [&](size_t ci) {
      return match.collectives[ci].start_ns - align[records[match.collectives[ci].members[0]].rank];
    };
    const auto c_end = [&](size_t ci) {
      return match.collectives[ci].end_ns - align[records[match.collectives[ci].members[0]].rank];
    };
    std::vector<std::vector<int64_t>> replies(P);
    for (size_t q = 0; q < P; ++q) {
      std::vector<int64_t>& out = replies[q];
      out.push_back(int64_t(match.collectives.size()));
      for (size_t r = rank_begin[q]; r < rank_begin[q + 1]; ++r) out.push_back(offset(uint32_t(r)));
      for (size_t i = rec_begin[q]; i < rec_begin[q + 1]; ++i) {
        const int64_t ci = coll_of[i];
        if (ci < 0) {
          out.insert(out.end(), {-1, 0, 0, 0});
        } else {
          out.insert(out.end(), {ci, c_start(size_t(ci)), c_end(size_t(ci)),
                                 rec_proc[match.collectives[size_t(ci)].members[0]]});
        }
      }
      size_t owned = 0;
      const size_t owned_at = out.size();
      out.push_back(0);
      for (size_t ci = 0; ci < match.collectives.size(); ++ci) {
        const MatchedCollective& mc = match.collectives[ci];
        if (rec_proc[mc.members[0]] != int32_t(q)) continue;
        ++owned;
        out.insert(out.end(), {int64_t(ci), c_start(ci), c_end(ci), int64_t(mc.members.size())});
        for (uint32_t i : mc.members) {
          out.insert(out.end(), {rec_gid[i], rec_proc[i], records[i].start_ns - offset(records[i].rank),
                                 records[i].end_ns - offset(records[i].rank)});
        }
      }
      out[owned_at] = int64_t(owned);
      out.insert(out.end(), joined.begin(), joined.end());
    }
    return replies;
  }

  // Process 0's answer to this part: [collectives in all, each rank's offset, per record: (collective or
  // -1, its start, its end, its owner), collectives owned, per owned: (index, start, end, members, per
  // member: (node, process, start, end)), each rank's group (the first rank joined to it by collectives)].
  Status apply_reply(const std::vector<int64_t>& v, const std::vector<NodeId>& node_of_record) {
    const Error cut = make_error("", "the collectives' matching arrived cut short");
    const int me = comm_->rank();
    size_t at = 0;
    const auto take = [&](size_t n) { return at + n <= v.size() ? (at += n, true) : false; };
    if (!take(1)) return cut;
    collectives_total_ = v[0];
    const size_t offsets_at = at;
    if (!take(ranks_.size())) return cut;
    shift_ranks(std::vector<int64_t>(v.begin() + std::ptrdiff_t(offsets_at), v.begin() + std::ptrdiff_t(at)));
    const NodeId rank_nodes = static_cast<NodeId>(g_.num_nodes());
    for (NodeId n : node_of_record) {
      const int64_t* c = v.data() + at;
      if (!take(4)) return cut;
      if (c[0] < 0) continue;
      g_.dur_ns[n] = 0;  // the kernel's own time is all wait + transfer
      if (c[3] == me) continue;  // its edges are added with the collective below
      const PointId cs = PointId(2 * (total_rank_nodes_ + size_t(c[0])));
      remote_.push_back({RemoteEdge{start_point(n), cs, int32_t(c[3]), false, EdgeKind::kCollective, 0}, 0});
      remote_.push_back({RemoteEdge{end_point(n), cs + 1, int32_t(c[3]), true, EdgeKind::kCollective, 0}, c[2]});
    }
    if (!take(1)) return cut;
    const int64_t owned = v[at - 1];
    for (int64_t k = 0; k < owned; ++k) {
      const int64_t* c = v.data() + at;
      if (!take(4) || c[3] < 1 || size_t(c[3]) > v.size() || !take(4 * size_t(c[3]))) return cut;
      const int64_t* m = c + 4;
      const NodeId first = NodeId(size_t(m[0]) - node_base_of_[size_t(me)]);
      if (m[1] != me || first >= rank_nodes) return cut;
      const NodeId cn = add_node(NodeKind::kCollective, kNoId, g_.rank[first], kNoId, g_.name[first], c[1], c[2]);
      global_.push_back(NodeId(total_rank_nodes_ + size_t(c[0])));
      for (int64_t i = 0; i < c[3]; ++i, m += 4) {
        if (m[1] == me) {
          const NodeId n = NodeId(size_t(m[0]) - node_base_of_[size_t(me)]);
          if (n >= rank_nodes) return cut;
          add_edge(n, false, cn, false, EdgeKind::kCollective);
          add_edge(cn, true, n, true, EdgeKind::kCollective);
          continue;
        }
        const PointId ms = PointId(2 * m[0]);
        remote_.push_back({RemoteEdge{start_point(cn), ms, int32_t(m[1]), true, EdgeKind::kCollective, 0}, m[2]});
        remote_.push_back({RemoteEdge{end_point(cn), ms + 1, int32_t(m[1]), false, EdgeKind::kCollective, 0}, 0});
      }
    }
    if (!take(total_ranks_)) return cut;
    joined_all_.assign(v.begin() + std::ptrdiff_t(at - total_ranks_), v.begin() + std::ptrdiff_t(at));
    return {};
  }

  // The latency of each edge between processes, as its destination's process decided it (or that it was
  // dropped): sent to the process of its source, in the order of (source, destination) both sides share.
  Status exchange_remote_latencies() {
    std::map<int32_t, std::vector<uint32_t>> in_from, out_to;
    for (uint32_t i = 0; i < remote_.size(); ++i) {
      (remote_[i].edge.into_local ? in_from : out_to)[remote_[i].edge.process].push_back(i);
    }
    const auto key = [&](uint32_t i) {
      const RemoteEdge& e = remote_[i].edge;
      return e.into_local ? std::make_pair(e.other, global_point(e.local))
                          : std::make_pair(global_point(e.local), e.other);
    };
    const auto by_key = [&](uint32_t a, uint32_t b) { return key(a) < key(b); };
    for (auto& [q, list] : in_from) {
      std::sort(list.begin(), list.end(), by_key);
      std::vector<int64_t> lats;
      for (uint32_t i : list) lats.push_back(remote_[i].dropped ? kMin : remote_[i].edge.lat_ns);
      EMO_RETURN_IF_ERROR(comm_->send(q, kTagLatencies, dist::to_bytes(lats)));
    }
    for (auto& [q, list] : out_to) {
      std::sort(list.begin(), list.end(), by_key);
      auto m = comm_->recv(q, kTagLatencies, dist::timeout_s());
      if (!m) return m.error();
      auto lats = dist::from_bytes(*m, q);
      if (!lats || lats->size() != list.size()) {
        return make_error("", fmt::format("process {} sent the latencies of other edges than it shares", q));
      }
      for (size_t k = 0; k < list.size(); ++k) {
        remote_[list[k]].dropped = (*lats)[k] == kMin;
        remote_[list[k]].edge.lat_ns = (*lats)[k];
      }
    }
    remote_.erase(std::remove_if(remote_.begin(), remote_.end(), [](const Remote& r) { return r.dropped; }),
                  remote_.end());
    return {};
  }

  // Every part's counts and checks to every process, reduced as one builder finds them for the whole
  // graph; an Error on every process where any part failed (the first's).
  Status reduce_parts(const Status& local) {
    std::vector<int64_t> ints{local.ok() ? 0 : 1};
    for (auto f : kSummed) ints.push_back(g_.stats.*f);
    ints.push_back(g_.stats.queued_wait_ns);
    int64_t b = kMaxI, e = kMin, mb = kMaxI, me_ = kMin;
    for (NodeId n = 0; n < g_.num_nodes(); ++n) {
      b = std::min(b, g_.meas_start_ns[n]);
      e = std::max(e, g_.meas_end_ns[n]);
      if (!g_.counts_for_span(n)) continue;
      mb = std::min(mb, g_.meas_start_ns[n]);
      me_ = std::max(me_, g_.meas_end_ns[n]);
    }
    const TailPart tail = gpu_tail_part();
    ints.insert(ints.end(), {b, e, mb, me_, int64_t(g_.queued_ops.size()), tail.ok ? 1 : 0, tail.any ? 1 : 0,
                             tail.tail_ns, improper_nesting_, align_note_ ? 1 : 0, int64_t(ranks_.size())});
    const auto [first, last] = rank_extents();
    for (size_t r = 0; r < ranks_.size(); ++r) ints.insert(ints.end(), {int64_t(g_.rank_ids[r]), first[r], last[r]});
    const std::string head = dist::to_bytes(ints);
    const Error err = local.ok() ? Error{} : local.error();
    std::vector<std::string_view> fields{head, err.where, err.what, err.note};
    for (auto f : kFirstExample) fields.push_back(g_.stats.*f);
    fields.push_back(g_.stats.queued_wait_example);
    auto parts = dist::all_gather(*comm_, kTagReduce, dist::frame(fields));
    if (!parts) return parts.error();
    constexpr size_t kHead = 1 + std::size(kSummed) + 1 + 11;
    BuildStats s;
    b = kMaxI, e = kMin, mb = kMaxI, me_ = kMin;
    bool queued = false, tail_ok = true, tail_any = false, note = false;
    int64_t tail_ns = 0, improper = 0;
    std::vector<int64_t> rank_first, rank_last;
    std::vector<int> rank_ids;
    for (size_t q = 0; q < parts->size(); ++q) {
      const Error cut = make_error("", fmt::format("the build's counts of process {} arrived cut short", q));
      auto f = dist::unframe((*parts)[q]);
      if (!f || f->size() != 4 + std::size(kFirstExample) + 1) return cut;
      auto v = dist::from_bytes((*f)[0], int(q));
      if (!v || v->size() < kHead) return cut;
      if ((*v)[0] != 0) return make_error(std::string((*f)[1]), std::string((*f)[2]), std::string((*f)[3]));
      size_t at = 1;
      for (auto fld : kSummed) s.*fld += (*v)[at++];
      const int64_t qw = (*v)[at++];
      if (qw > s.queued_wait_ns) s.queued_wait_ns = qw, s.queued_wait_example = std::string((*f)[4 + std::size(kFirstExample)]);
      b = std::min(b, (*v)[at]), e = std::max(e, (*v)[at + 1]);
      mb = std::min(mb, (*v)[at + 2]), me_ = std::max(me_, (*v)[at + 3]);
      queued = queued || (*v)[at + 4] > 0;
      tail_ok = tail_ok && (*v)[at + 5] != 0;
      tail_any = tail_any || (*v)[at + 6] != 0;
      tail_ns = std::max(tail_ns, (*v)[at + 7]);
      improper += (*v)[at + 8];
      note = note || (*v)[at + 9] != 0;
      const auto k = size_t((*v)[at + 10]);
      at += 11;
      if (k > v->size() || v->size() != at + 3 * k) return cut;
      for (size_t r = 0; r < k; ++r) {
        rank_ids.push_back(int((*v)[at + 3 * r]));
        rank_first.push_back((*v)[at + 3 * r + 1]);
        rank_last.push_back((*v)[at + 3 * r + 2]);
      }
      for (size_t i = 0; i < std::size(kFirstExample); ++i) {
        if ((s.*kFirstExample[i]).empty()) s.*kFirstExample[i] = std::string((*f)[4 + i]);
      }
    }
    if (rank_first.size() != total_ranks_) return make_error("", "the processes disagree on the number of ranks");
    if (s.waiting_threads > 0) {
      const int64_t measured = (me_ == kMin ? 0 : me_) - (mb == kMaxI ? 0 : mb);
      s.waiting_thread_span_ns = std::max<int64_t>(0, (e - b) - measured);
    }
    if (options_.split_collectives && total_ranks_ >= 2) rank_group_stats(joined_all_, rank_ids, rank_first, rank_last, s);
    queued_loop_ = queued;
    g_.gpu_tail_loop = !queued && tail_ok && tail_any;
    s.gpu_tail_ns = g_.gpu_tail_loop ? tail_ns : 0;
    if (note) s.notes.push_back(kAlignNote);
    if (improper > 0) s.notes.push_back(improper_note(improper));
    g_.stats = std::move(s);
    return {};
  }

  // ---------- nodes ----------
  StrId intern(uint32_t r, StrId local) {
    auto& m = name_map_[r];
    if (local >= m.size()) m.resize(local + 1, kNoId);
    if (m[local] == kNoId) m[local] = g_.strings.intern(ranks_[r].strings.view(local));
    return m[local];
  }

  NodeId add_node(NodeKind kind, uint32_t lane, uint32_t rank, uint32_t event, StrId name,
                  int64_t start, int64_t end) {
    auto id = static_cast<NodeId>(g_.kind.size());
    g_.kind.push_back(kind);
    g_.lane.push_back(lane);
    g_.rank.push_back(rank);
    g_.event.push_back(event);
    g_.name.push_back(name);
    g_.dur_ns.push_back(end - start);
    g_.meas_start_ns.push_back(start);
    g_.meas_end_ns.push_back(end);
    g_.on_waiting_thread.push_back(0);
    return id;
  }

  void add_edge(NodeId src, bool src_end, NodeId dst, bool dst_end, EdgeKind kind) {
    g_.edges.push_back(Edge{src_end ? end_point(src) : start_point(src),
                            dst_end ? end_point(dst) : start_point(dst), 0, kind});
  }

  // Absolute-time base of each rank so that all ranks share one timeline.
  void compute_rank_bases(int64_t min_origin) {
    for (size_t r = 0; r < ranks_.size(); ++r) rank_base_[r] = ranks_[r].origin_ns - min_origin;
    g_.rank_offset_ns.assign(ranks_.size(), 0);
    for (const auto& t : ranks_) g_.step_of_rank.push_back(t.steps.size() == 1 ? t.steps[0].number : -1);
  }

  uint32_t graph_lane(uint32_t r, uint32_t trace_lane) {
    uint64_t key = (static_cast<uint64_t>(r) << 32) | trace_lane;
    auto it = lane_map_.find(key);
    if (it != lane_map_.end()) return it->second;
    const trace::Lane& tl = ranks_[r].lanes[trace_lane];
    Lane l;
    l.rank = r;
    l.gpu = tl.gpu;
    l.pid = tl.pid;
    l.tid = tl.tid;
    l.device = tl.device;
    l.stream = tl.stream;
    auto id = static_cast<uint32_t>(g_.lanes.size());
    g_.lanes.push_back(l);
    lane_map_.emplace(key, id);
    return id;
  }

  // Cuts each CPU thread into segments owned by the innermost covering event.
  void add_cpu_nodes(uint32_t r) {
    const RankTrace& t = ranks_[r];
    const int64_t base = rank_base_[r];
    // Events of each CPU lane, in trace order (ts asc, dur desc: parents first).
    std::vector<std::vector<uint32_t>> by_lane(t.lanes.size());
    for (uint32_t i = 0; i < t.events.size(); ++i) {
      const Event& e = t.events[i];
      if (trace::is_cpu_side(e.kind) && e.lane < t.lanes.size()) by_lane[e.lane].push_back(i);
      if (e.kind == EventKind::kCudaSync) idx_[r].sync_events.push_back(i);
    }
    struct Open {
      uint32_t ev;
      int64_t end;
      bool wait;  // a blocked-wait frame, or inside one
    };
    std::vector<Open> stack;
    std::vector<int8_t> wait_name(t.strings.size(), -1);  // per name, computed once
    auto is_wait_frame = [&](const Event& e) {
      if (e.kind != EventKind::kPythonFunction || e.name >= wait_name.size()) return false;
      int8_t& w = wait_name[e.name];
      if (w < 0) w = is_blocked_wait_frame(t.strings.view(e.name)) ? 1 : 0;
      return w == 1;
    };
    for (uint32_t ln = 0; ln < by_lane.size(); ++ln) {
      if (by_lane[ln].empty()) continue;
      const uint32_t lane = graph_lane(r, ln);
      const auto first_node = static_cast<NodeId>(g_.num_nodes());
      NodeId prev = kNoId;
      int64_t cursor = kMin;  // time up to which the thread is covered by nodes
      stack.clear();
      auto emit = [&](NodeKind kind, uint32_t ev, StrId name, int64_t s, int64_t e) {
        if (e <= s && kind != NodeKind::kRuntime && kind != NodeKind::kSyncCall) return kNoId;
        NodeId n = add_node(kind, lane, r, ev, name, s + base, e + base);
        if (prev != kNoId) add_edge(prev, true, n, false, EdgeKind::kThread);
        prev = n;
        cursor = e;
        return n;
      };
      // Emits the self time of the open events up to `until`.
      auto advance = [&](int64_t until) {
        while (cursor < until) {
          while (!stack.empty() && stack.back().end <= cursor) stack.pop_back();
          if (stack.empty()) {
            emit(NodeKind::kCpuGap, kNoId, kEmptyStr, cursor, until);
            break;
          }
          int64_t stop = std::min(until, stack.back().end);
          const Event& owner = t.events[stack.back().ev];
          emit(stack.back().wait ? NodeKind::kCpuWait : NodeKind::kCpuOp, stack.back().ev, intern(r, owner.name),
               cursor, stop);
        }
      };
      for (uint32_t ev : by_lane[ln]) {
        const Event& e = t.events[ev];
        int64_t s = e.ts_ns, end = e.ts_ns + e.dur_ns;
        if (cursor == kMin) cursor = s;
        if (end <= cursor && !(e.dur_ns == 0 && s == cursor)) {
          if (s < cursor) ++improper_nesting_;  // inside a runtime call, or overlapping a sibling
          continue;
        }
        s = std::max(s, cursor);
        advance(s);
        while (!stack.empty() && stack.back().end <= s) stack.pop_back();
        if (!stack.empty() && end > stack.back().end) {
          ++improper_nesting_;  // child outlives its parent: clip it
          end = stack.back().end;
        }
        if (e.kind == EventKind::kRuntime || e.kind == EventKind::kDriver) {
          // Runtime calls are leaves: anything recorded inside them is folded in.
          NodeId n = emit(NodeKind::kRuntime, ev, intern(r, e.name), s, end);
          if (e.correlation != trace::kNone) idx_[r].runtime_by_corr[e.correlation] = n;
          idx_[r].runtime_nodes.push_back(n);
          continue;
        }
        const bool inside_wait = !stack.empty() && stack.back().wait;
        const bool wait = inside_wait || is_wait_frame(e);
        if (wait && !inside_wait) outer_waits_.push_back(OuterWait{r, lane, ev});
        stack.push_back(Open{ev, end, wait});
      }
      // Flush: the outermost open event ends last (children were clipped to it).
      if (!stack.empty()) advance(stack.front().end);
      const auto end_node = static_cast<NodeId>(g_.num_nodes());
      if (end_node > first_node) cpu_lanes_.push_back(CpuLaneNodes{r, lane, first_node, end_node});
    }
  }

  void add_gpu_nodes(uint32_t r) {
    const RankTrace& t = ranks_[r];
    const int64_t base = rank_base_[r];
    for (uint32_t i = 0; i < t.events.size(); ++i) {
      const Event& e = t.events[i];
      if (!trace::is_gpu_op(e.kind) || e.lane >= t.lanes.size()) continue;
      NodeKind kind = e.kind == EventKind::kMemcpy   ? NodeKind::kMemcpy
                      : e.kind == EventKind::kMemset ? NodeKind::kMemset
                      : e.collective != trace::kNoIndex ? NodeKind::kCommKernel
                                                        : NodeKind::kKernel;
      const uint32_t lane = graph_lane(r, e.lane);
      NodeId n = add_node(kind, lane, r, i, intern(r, e.name), e.ts_ns + base, e.ts_ns + e.dur_ns + base);
      auto& so = idx_[r].streams[{g_.lanes[lane].device, g_.lanes[lane].stream}];
      if (!so.nodes.empty()) add_edge(so.nodes.back(), true, n, false, EdgeKind::kStream);
      so.nodes.push_back(n);
      so.corr.push_back(e.correlation);
      so.key.push_back(std::max(e.correlation, so.key.empty() ? trace::kNone : so.key.back()));
      if (e.correlation != trace::kNone) idx_[r].gpu_by_corr.emplace_back(e.correlation, n);
    }
    std::sort(idx_[r].gpu_by_corr.begin(), idx_[r].gpu_by_corr.end());
  }

  // ---------- edges ----------
  void add_launch_edges(uint32_t r) {
    // A launch call far longer than this rank's launches take (a first launch loading its module, a host
    // stalled mid-call): its time is the host's, and the op it launched waits for it (below).
    std::vector<int64_t> call_ns;
    for (const auto& [key, so] : idx_[r].streams) {
      for (size_t i = 0; i < so.nodes.size(); ++i) {
        auto it = so.corr[i] == trace::kNone ? idx_[r].runtime_by_corr.end() : idx_[r].runtime_by_corr.find(so.corr[i]);
        if (it != idx_[r].runtime_by_corr.end()) call_ns.push_back(g_.meas_end_ns[it->second] - g_.meas_start_ns[it->second]);
      }
    }
    const int64_t slow_call_ns = std::max<int64_t>(kSlowLaunchMinNs, kSlowLaunchMultiple * upper_median(call_ns, int64_t{0}));
    for (const auto& [key, so] : idx_[r].streams) {
      for (size_t i = 0; i < so.nodes.size(); ++i) {
        auto it = so.corr[i] == trace::kNone ? idx_[r].runtime_by_corr.end()
                                             : idx_[r].runtime_by_corr.find(so.corr[i]);
        if (it == idx_[r].runtime_by_corr.end()) {
          ++g_.stats.gpu_ops_without_launch;
          continue;
        }
        // The op starts at most a launch latency after its call starts; but where the call was a slow one
        // and the op started only after it returned, on a stream whose work before it had ended by then (the
        // call did not wait for a queue slot), the call's own time came first: the op follows the call's
        // end, so that it moves with the call's time in a what-if (host x0.5 halves a 6.5 ms first launch).
        const NodeId call = it->second, op = so.nodes[i];
        const bool after_call = g_.meas_end_ns[call] - g_.meas_start_ns[call] >= slow_call_ns &&
                                g_.meas_start_ns[op] >= g_.meas_end_ns[call] &&
                                (i == 0 || g_.meas_end_ns[so.nodes[i - 1]] <= g_.meas_end_ns[call]);
        add_edge(call, after_call, op, false, EdgeKind::kLaunch);
      }
    }
  }

  // Last op on (device, stream) launched before correlation `corr` (kNoId if none).
  NodeId last_before(uint32_t r, int32_t device, int32_t stream, int64_t corr) const {
    auto it = idx_[r].streams.find({device, stream});
    if (it == idx_[r].streams.end()) return kNoId;
    const auto& so = it->second;
    auto i = static_cast<size_t>(std::lower_bound(so.key.begin(), so.key.end(), corr) - so.key.begin());
    while (i-- > 0) {
      if (so.corr[i] != trace::kNone && so.corr[i] < corr) return so.nodes[i];
    }
    return kNoId;
  }
  // First op on (device, stream) launched after correlation `corr`.
  NodeId first_after(uint32_t r, int32_t device, int32_t stream, int64_t corr) const {
    auto it = idx_[r].streams.find({device, stream});
    if (it == idx_[r].streams.end()) return kNoId;
    const auto& so = it->second;
    auto i = static_cast<size_t>(std::upper_bound(so.key.begin(), so.key.end(), corr) - so.key.begin());
    for (; i < so.nodes.size(); ++i) {
      if (so.corr[i] != trace::kNone && so.corr[i] > corr) return so.nodes[i];
    }
    return kNoId;
  }

  int32_t device_of_rank(uint32_t r) const {
    return idx_[r].streams.empty() ? 0 : idx_[r].streams.begin()->first.first;
  }

  void add_cross_stream_edges(uint32_t r) {
    const RankTrace& t = ranks_[r];
    // 1) From cuda_sync "Stream Wait Event" records that name the recording stream.
    std::unordered_map<int64_t, bool> waits_done;  // cudaStreamWaitEvent correlation handled
    for (uint32_t i : idx_[r].sync_events) {
      const Event& e = t.events[i];
      if (e.sync != SyncKind::kStreamWaitEvent) continue;
      if (e.wait_on_stream < 0 || e.wait_on_event_record_corr == trace::kNone || e.stream < 0) continue;
      int32_t dev = e.device >= 0 ? e.device : device_of_rank(r);
      NodeId src = last_before(r, dev, e.wait_on_stream, e.wait_on_event_record_corr);
      NodeId dst = first_after(r, dev, e.stream, e.correlation);
      waits_done[e.correlation] = true;
      if (src == kNoId || dst == kNoId || e.wait_on_stream == e.stream) continue;
      add_edge(src, true, dst, false, EdgeKind::kCrossStream);
      ++g_.stats.cross_stream_from_sync_events;
    }
    // 2) Otherwise pair cudaEventRecord / cudaStreamWaitEvent on each thread: the
    // record's stream is that of the last op the thread launched before it; the
    // waiting stream is that of the next op the thread launches after the wait.
    struct ThreadState {
      int64_t last_launch_corr = trace::kNone;
      int32_t last_stream = -1;
      int64_t record_corr = trace::kNone;
      int32_t record_stream = -1;
      int64_t pending_wait_corr = trace::kNone;
      int64_t pending_src_corr = trace::kNone;
      int32_t pending_src_stream = -1;
    };
    std::unordered_map<uint32_t, ThreadState> threads;
    int32_t dev = device_of_rank(r);
    for (const Event& e : t.events) {
      if (e.kind != EventKind::kRuntime && e.kind != EventKind::kDriver) continue;
      if (e.correlation == trace::kNone) continue;
      ThreadState& st = threads[e.lane];
      std::string_view name = t.strings.view(e.name);
      auto [gb, ge] = idx_[r].gpu_ops_of(e.correlation);
      if (gb != ge) {
        NodeId op = gb->second;
        int32_t stream = g_.lanes[g_.lane[op]].stream;
        if (st.pending_wait_corr != trace::kNone) {
          if (st.pending_src_stream == kInferStream) {
            NodeId src = infer_wait_source(r, dev, stream, st.pending_wait_corr, op, e.ts_ns + rank_base_[r]);
            if (src != kNoId) {
              add_edge(src, true, op, false, EdgeKind::kCrossStream);
              ++g_.stats.cross_stream_inferred;
            }
          } else if (stream != st.pending_src_stream && st.pending_src_stream >= 0) {
            NodeId src = last_before(r, dev, st.pending_src_stream, st.pending_src_corr);
            if (src != kNoId) {
              add_edge(src, true, op, false, EdgeKind::kCrossStream);
              ++g_.stats.cross_stream_from_runtime_pairs;
            }
          }
          st.pending_wait_corr = trace::kNone;
        }
        st.last_launch_corr = e.correlation;
        st.last_stream = stream;
      } else if (trace::classify_runtime_call(name) == trace::RuntimeCall::kEventRecord) {
        st.record_corr = e.correlation;
        st.record_stream = st.last_stream;
      } else if (trace::classify_runtime_call(name) == trace::RuntimeCall::kStreamWaitEvent) {
        if (waits_done.count(e.correlation)) continue;
        st.pending_wait_corr = e.correlation;
        st.pending_src_corr = st.record_corr;
        // Some profilers drop cudaEventRecord calls; then the source is inferred.
        st.pending_src_stream = st.record_corr == trace::kNone ? kInferStream : st.record_stream;
      }
    }
  }

  // A stream wait whose event record is not in the trace: the waited-on op is
  // taken to be the op on another stream of the device, launched before the
  // wait, that was still running when the waiting op was launched and ended
  // last before the waiting op started — the only one that could have held it.
  NodeId infer_wait_source(uint32_t r, int32_t dev, int32_t dst_stream, int64_t wait_corr, NodeId dst,
                           int64_t dst_launch_ns) const {
    NodeId best = kNoId;
    for (const auto& [key, so] : idx_[r].streams) {
      if (key.first != dev || key.second == dst_stream) continue;
      NodeId n = last_before(r, key.first, key.second, wait_corr);
      if (n == kNoId || g_.meas_end_ns[n] < dst_launch_ns) continue;
      if (g_.meas_end_ns[n] > g_.meas_start_ns[dst] + kContradictionToleranceNs) continue;
      if (best == kNoId || g_.meas_end_ns[n] > g_.meas_end_ns[best]) best = n;
    }
    return best;
  }

  // GPU -> CPU: blocking calls end only after the GPU work they wait on.
  void add_sync_edges(uint32_t r) {
    const RankTrace& t = ranks_[r];
    std::unordered_map<int64_t, uint32_t> sync_by_corr;
    for (uint32_t i : idx_[r].sync_events) {
      const Event& e = t.events[i];
      if (e.correlation != trace::kNone) sync_by_corr[e.correlation] = i;
    }
    std::vector<NodeId> srcs;
    for (NodeId rt : idx_[r].runtime_nodes) {
      const Event& call = t.events[g_.event[rt]];
      const int64_t corr = call.correlation;
      if (corr == trace::kNone) continue;
      const trace::RuntimeCall call_kind = trace::classify_runtime_call(t.strings.view(call.name));
      srcs.clear();
      const int32_t dev = device_of_rank(r);
      auto all_streams = [&](bool only_latest) {
        NodeId best = kNoId;
        for (const auto& [key, so] : idx_[r].streams) {
          if (key.first != dev) continue;
          NodeId n = last_before(r, key.first, key.second, corr);
          if (n == kNoId) continue;
          if (!only_latest) {
            srcs.push_back(n);
          } else if (g_.meas_end_ns[n] <= g_.meas_end_ns[rt] &&
                     (best == kNoId || g_.meas_end_ns[n] > g_.meas_end_ns[best])) {
            best = n;
          }
        }
        if (only_latest && best != kNoId) srcs.push_back(best);
      };
      auto sit = sync_by_corr.find(corr);
      if (sit != sync_by_corr.end()) {
        const Event& s = t.events[sit->second];
        int32_t sdev = s.device >= 0 ? s.device : dev;
        switch (s.sync) {
          case SyncKind::kContextSync: all_streams(false); break;
          case SyncKind::kStreamSync: {
            NodeId n = last_before(r, sdev, s.stream, corr);
            if (n != kNoId) srcs.push_back(n);
            break;
          }
          case SyncKind::kEventSync:
            if (s.wait_on_stream >= 0 && s.wait_on_event_record_corr != trace::kNone) {
              NodeId n = last_before(r, sdev, s.wait_on_stream, s.wait_on_event_record_corr);
              if (n != kNoId) srcs.push_back(n);
            }
            break;
          default: break;
        }
      } else if (call_kind == trace::RuntimeCall::kDeviceSync) {
        all_streams(false);
      } else if (call_kind == trace::RuntimeCall::kStreamSync || call_kind == trace::RuntimeCall::kEventSync) {
        all_streams(true);
      }
      if (call_kind == trace::RuntimeCall::kMemcpy || call_kind == trace::RuntimeCall::kMemcpyAsync) {
        // A copy call that returned after its copy finished waited for it.
        auto [gb, ge] = idx_[r].gpu_ops_of(corr);
        {
          for (auto* it = gb; it != ge; ++it) {
            NodeId n = it->second;
            if (g_.meas_end_ns[n] <= g_.meas_end_ns[rt] && g_.meas_start_ns[n] >= g_.meas_start_ns[rt]) {
              srcs.push_back(n);
            }
          }
        }
      }
      bool any = false;
      int64_t latest_src_end = kMin;
      for (NodeId n : srcs) {
        if (g_.meas_end_ns[n] > g_.meas_end_ns[rt] + kContradictionToleranceNs) continue;  // not waited on
        add_edge(n, true, rt, true, EdgeKind::kSync);
        latest_src_end = std::max(latest_src_end, g_.meas_end_ns[n]);
        any = true;
      }
      if (!any) continue;
      g_.kind[rt] = NodeKind::kSyncCall;
      if (latest_src_end > g_.meas_start_ns[rt]) {
        // Blocked: its own cost is the part after the GPU finished (the wake-up).
        g_.dur_ns[rt] = std::clamp<int64_t>(g_.meas_end_ns[rt] - latest_src_end, 0, g_.dur_ns[rt]);
      }
    }
  }

  // ---------- host waits ----------
  // The op a host wait over [t0, t1] waits on: of the last op launched before
  // correlation `corr` on each stream of the rank (the newest work the host can
  // be waiting for), the one that was still running at t0 and ended last, at
  // most kPollToleranceNs before t1. kNoId when no op ends so.
  NodeId waited_op(uint32_t r, int64_t corr, int64_t t0, int64_t t1) const {
    NodeId best = kNoId;
    for (const auto& [key, so] : idx_[r].streams) {
      NodeId n = last_before(r, key.first, key.second, corr);
      if (n == kNoId) continue;
      const int64_t e = g_.meas_end_ns[n];
      if (e <= t0 || e > t1 + kContradictionToleranceNs || e < t1 - kPollToleranceNs) continue;
      if (best == kNoId || e > g_.meas_end_ns[best]) best = n;
    }
    return best;
  }

  // The communication kernel a host spin over [t0, t1] waits on when it ends
  // while that kernel still runs (DeepEP's notify kernels write the host-mapped
  // counters the host spins on before they finish): of the last op launched
  // before `corr` on each stream, a communication kernel that started at least
  // kPollToleranceNs into the spin and was still running at its end. kNoId when
  // there is none.
  NodeId signalling_op(uint32_t r, int64_t corr, int64_t t0, int64_t t1) const {
    NodeId best = kNoId;
    for (const auto& [key, so] : idx_[r].streams) {
      NodeId n = last_before(r, key.first, key.second, corr);
      if (n == kNoId || g_.kind[n] != NodeKind::kCommKernel) continue;
      const int64_t s = g_.meas_start_ns[n], e = g_.meas_end_ns[n];
      // It started well inside the spin (the host waited for the GPU to reach it)
      // and still ran at its end.
      if (s < t0 + kPollToleranceNs || s >= t1 || e <= t1 + kContradictionToleranceNs) continue;
      if (best == kNoId || s > g_.meas_start_ns[best]) best = n;
    }
    return best;
  }

  // Makes `last` (the node whose end is the loop's end) wait on `op`: a GPU ->
  // CPU sync edge whose latency is the measured wake-up, and the loop's time up
  // to the op's end becomes that wait (nodes first..last-1 take no time of their
  // own, `last` keeps what came after the op ended). So the loop ends when the
  // op ends, however long the op runs in a what-if. With `signal`, the loop
  // ended while `op` ran (it woke on memory the kernel writes): the edge runs
  // from the op's start with the measured time from that start to the loop's
  // end, so the loop ends when the kernel gets that far, however late it starts.
  void make_poll_wait(uint32_t r, NodeId first, NodeId last, NodeId op, bool signal = false) {
    const int64_t t0 = g_.meas_start_ns[first], t1 = g_.meas_end_ns[last];
    const int64_t op_point = signal ? std::min(t1, g_.meas_end_ns[op]) : g_.meas_end_ns[op];
    for (NodeId k = first; k < last; ++k) g_.dur_ns[k] = 0;
    g_.kind[last] = NodeKind::kSyncCall;
    g_.dur_ns[last] = std::clamp<int64_t>(t1 - op_point, 0, g_.meas_end_ns[last] - g_.meas_start_ns[last]);
    forced_edges_.push_back(static_cast<uint32_t>(g_.edges.size()));
    add_edge(op, !signal, last, true, EdgeKind::kSync);
    g_.stats.poll_wait_ns += std::max<int64_t>(0, op_point - t0);
    if (g_.stats.poll_example.empty()) {
      const RankTrace& t = ranks_[r];
      const int64_t op_end = g_.meas_end_ns[op];
      g_.stats.poll_example =
          signal ? fmt::format("{} (thread {}), {:.3f} ms, ends {:.3f} ms after {} starts, {:.3f} ms before it ends",
                               t.strings.view(t.events[g_.event[last]].name), g_.lanes[g_.lane[last]].tid,
                               ms(t1 - t0), ms(t1 - g_.meas_start_ns[op]), g_.strings.view(g_.name[op]),
                               ms(op_end - t1))
                 : fmt::format("{} (thread {}), {:.3f} ms, ends {:.3f} ms after {} ends",
                               t.strings.view(t.events[g_.event[last]].name), g_.lanes[g_.lane[last]].tid,
                               ms(t1 - t0), ms(t1 - op_end), g_.strings.view(g_.name[op]));
    }
  }

  // Host polling is a GPU -> CPU wait (DESIGN.md §2, "cudaEventQuery loops"):
  // 1) a run of two or more event/stream queries on a thread, with nothing
  //    between them but Python frames, waits, unexplained gaps and error
  //    checks, that ends just after an op it can be waiting for ends;
  // 2) a stretch of an annotated range with nothing recorded in it (the host
  //    spins on memory the GPU writes, as DeepEP's dispatch waits do): the whole
  //    of a childless range, or a piece of a range's self time between its
  //    children right after the call that launched the op it waits on, at
  //    least kPollMinRangeNs long, that ends just after such an op ends, or
  //    while a communication kernel launched before it and started inside it
  //    still runs (signalling_op).
  void add_poll_waits(uint32_t r) {
    const RankTrace& t = ranks_[r];
    if (idx_[r].streams.empty()) return;
    std::vector<int8_t> query_name(t.strings.size(), -1), check_name(t.strings.size(), -1);
    auto name_of = [&](NodeId n) { return t.strings.view(t.events[g_.event[n]].name); };
    auto is_query = [&](NodeId n) {
      if (g_.kind[n] != NodeKind::kRuntime || g_.event[n] == kNoId) return false;
      if (t.events[g_.event[n]].name >= query_name.size()) return false;
      int8_t& q = query_name[t.events[g_.event[n]].name];
      if (q < 0) q = is_gpu_query(name_of(n)) ? 1 : 0;
      return q == 1;
    };
    // What a polling loop does between two queries without ending the run.
    auto in_loop = [&](NodeId n) {
      switch (g_.kind[n]) {
        case NodeKind::kCpuGap:
        case NodeKind::kCpuWait: return true;
        case NodeKind::kCpuOp: return t.events[g_.event[n]].kind == EventKind::kPythonFunction;
        case NodeKind::kRuntime: {
          if (t.events[g_.event[n]].name >= check_name.size()) return false;
          int8_t& c = check_name[t.events[g_.event[n]].name];
          if (c < 0) {
            std::string_view nm = name_of(n);
            c = nm == "cudaGetLastError" || nm == "cudaPeekAtLastError" || nm == "hipGetLastError" ||
                        nm == "hipPeekAtLastError"
                    ? 1
                    : 0;
          }
          return c == 1;
        }
        default: return false;
      }
    };
    // Correlation bound of "launched before time T": the largest correlation of
    // the rank's calls that started before T (correlations grow in launch order).
    std::vector<std::pair<int64_t, int64_t>> started;  // (start, running max correlation)
    for (NodeId rt : idx_[r].runtime_nodes) {
      const int64_t c = t.events[g_.event[rt]].correlation;
      if (c != trace::kNone) started.emplace_back(g_.meas_start_ns[rt], c);
    }
    std::sort(started.begin(), started.end());
    for (size_t i = 1; i < started.size(); ++i) started[i].second = std::max(started[i].second, started[i - 1].second);
    auto launched_before = [&](int64_t ts) {
      auto it = std::lower_bound(started.begin(), started.end(), std::make_pair(ts, std::numeric_limits<int64_t>::min()));
      return it == started.begin() ? trace::kNone : std::prev(it)->second + 1;
    };
    for (const CpuLaneNodes& ln : cpu_lanes_) {
      if (ln.rank != r) continue;
      // 1) query runs
      for (NodeId i = ln.first; i < ln.end;) {
        if (!is_query(i)) {
          ++i;
          continue;
        }
        NodeId first = i, last = i;
        int queries = 1;
        for (NodeId j = i + 1; j < ln.end && (is_query(j) || in_loop(j)); ++j) {
          if (is_query(j)) {
            last = j;
            ++queries;
          }
        }
        i = last + 1;
        const int64_t corr = t.events[g_.event[first]].correlation;
        if (queries < 2 || corr == trace::kNone) continue;
        NodeId op = waited_op(r, corr, g_.meas_start_ns[first], g_.meas_end_ns[last]);
        if (op == kNoId) continue;
        make_poll_wait(r, first, last, op);
        ++g_.stats.poll_query_loops;
      }
      // 2) spin stretches of annotated ranges: a node holding a childless range
      //    whole, or one piece of a range's self time
      for (NodeId n = ln.first; n < ln.end; ++n) {
        if (g_.kind[n] != NodeKind::kCpuOp || g_.event[n] == kNoId) continue;
        const Event& e = t.events[g_.event[n]];
        const int64_t t0 = g_.meas_start_ns[n], t1 = g_.meas_end_ns[n];
        if (e.kind != EventKind::kUserAnnotation || t1 - t0 < kPollMinRangeNs) continue;
        if (t.strings.view(e.name).substr(0, 13) == "ProfilerStep#") continue;
        const int64_t bound = launched_before(t0);
        if (bound == trace::kNone) continue;
        NodeId op = waited_op(r, bound, t0, t1);
        bool signal = false;
        if (op == kNoId) {
          op = signalling_op(r, bound, t0, t1);
          signal = true;
        }
        if (op == kNoId) continue;
        const bool whole = t0 == e.ts_ns + rank_base_[r] && t1 == e.ts_ns + e.dur_ns + rank_base_[r];
        if (!whole) {
          // A piece of self time spins only right after the call that launched
          // the op it waits on (DeepEP launches its notify kernel, then spins).
          const int64_t op_corr = g_.event[op] == kNoId ? trace::kNone : t.events[g_.event[op]].correlation;
          if (n == ln.first || op_corr == trace::kNone || g_.event[n - 1] == kNoId ||
              (g_.kind[n - 1] != NodeKind::kRuntime && g_.kind[n - 1] != NodeKind::kSyncCall) ||
              t.events[g_.event[n - 1]].correlation != op_corr)
            continue;
        }
        make_poll_wait(r, n, n, op, signal);
        ++g_.stats.poll_ranges;
      }
    }
  }

  // Dependencies between CPU threads (docs/replay.md, "Threads that wake threads"). Kineto records one
  // kind: fwdbwd flows, from a forward op to the backward op the autograd engine ran for it, on the
  // engine's own thread. Each becomes an edge from the forward op's end to the backward op's start, so
  // backward starts no earlier than the forward ops it needs (without it the engine thread's first op
  // is anchored at its recorded time). And the thread that called backward() sat blocked until the
  // engine finished: where one node of it (a gap or an op's self time with nothing recorded inside)
  // spans the whole of the other thread's work from its first backward op to its last node, that node
  // becomes a wait on the last node's end (its own time is what came after), so the loop resumes when
  // backward ends, however long backward takes in a what-if.
  void add_thread_flows(uint32_t r) {
    const RankTrace& t = ranks_[r];
    std::unordered_map<uint32_t, std::pair<uint32_t, uint32_t>> flows;  // flow -> (forward op, backward op)
    for (uint32_t i = 0; i < t.events.size(); ++i) {
      const Event& e = t.events[i];
      if (e.flow_out != 0) flows.try_emplace(e.flow_out, kNoId, kNoId).first->second.first = i;
      if (e.flow_in != 0) flows.try_emplace(e.flow_in, kNoId, kNoId).first->second.second = i;
    }
    if (flows.empty()) return;
    std::unordered_map<uint32_t, const CpuLaneNodes*> by_lane;
    for (const CpuLaneNodes& ln : cpu_lanes_) {
      if (ln.rank == r) by_lane[ln.lane] = &ln;
    }
    auto nodes_of = [&](uint32_t ev) -> const CpuLaneNodes* {
      const uint32_t tl = t.events[ev].lane;
      auto lm = lane_map_.find((static_cast<uint64_t>(r) << 32) | tl);
      if (lm == lane_map_.end()) return nullptr;
      auto it = by_lane.find(lm->second);
      return it == by_lane.end() ? nullptr : it->second;
    };
    // The node a CPU op's time ends in, and the one it starts with (a lane's nodes are in time order).
    auto last_node = [&](const CpuLaneNodes& ln, int64_t s, int64_t e) -> NodeId {
      auto it = std::lower_bound(g_.meas_start_ns.begin() + ln.first, g_.meas_start_ns.begin() + ln.end, e);
      if (it == g_.meas_start_ns.begin() + ln.first) return kNoId;
      const auto n = static_cast<NodeId>(std::prev(it) - g_.meas_start_ns.begin());
      return g_.meas_end_ns[n] > s ? n : kNoId;
    };
    auto first_node = [&](const CpuLaneNodes& ln, int64_t s, int64_t e) -> NodeId {
      auto it = std::lower_bound(g_.meas_start_ns.begin() + ln.first, g_.meas_start_ns.begin() + ln.end, s);
      if (it == g_.meas_start_ns.begin() + ln.end) return kNoId;
      const auto n = static_cast<NodeId>(it - g_.meas_start_ns.begin());
      return g_.meas_start_ns[n] < e ? n : kNoId;
    };
    const int64_t base = rank_base_[r];
    // Per (forward thread, backward thread): the earliest backward op's first node, and the forward
    // op's last node of its flow.
    std::map<std::pair<const CpuLaneNodes*, const CpuLaneNodes*>, std::pair<NodeId, NodeId>> first_backward;
    std::vector<std::pair<uint32_t, std::pair<uint32_t, uint32_t>>> ordered(flows.begin(), flows.end());
    std::sort(ordered.begin(), ordered.end());  // by flow number: a deterministic edge order
    for (const auto& [k, ends] : ordered) {
      const auto [fwd, bwd] = ends;
      if (fwd == kNoId || bwd == kNoId) continue;  // one end outside the step
      const CpuLaneNodes* from = nodes_of(fwd);
      const CpuLaneNodes* to = nodes_of(bwd);
      if (from == nullptr || to == nullptr || from == to) continue;  // one thread: its order already holds
      const Event& f = t.events[fwd];
      const Event& b = t.events[bwd];
      const NodeId src = last_node(*from, f.ts_ns + base, f.ts_ns + f.dur_ns + base);
      const NodeId dst = first_node(*to, b.ts_ns + base, b.ts_ns + b.dur_ns + base);
      if (src == kNoId || dst == kNoId) continue;
      add_edge(src, true, dst, false, EdgeKind::kCrossThread);
      ++g_.stats.thread_flow_edges;
      auto [slot, fresh] = first_backward.try_emplace({from, to}, dst, src);
      if (!fresh && g_.meas_start_ns[dst] < g_.meas_start_ns[slot->second.first]) slot->second = {dst, src};
    }
    for (const auto& [threads, first] : first_backward) {
      const auto [from, to] = threads;
      // The engine's run that holds the first backward op starts where the thread last sat idle (the
      // engine's own frames, evaluate_function, come before the op): that start follows the op's
      // forward op too, or the run would stay anchored where it was recorded.
      NodeId b0 = first.first;
      while (b0 > to->first && g_.kind[b0 - 1] != NodeKind::kCpuGap) --b0;
      if (b0 != first.first) {
        add_edge(first.second, true, b0, false, EdgeKind::kCrossThread);
        ++g_.stats.thread_flow_edges;
      }
      const NodeId last = to->end - 1;  // the engine thread's last node in the step
      const int64_t begin = g_.meas_start_ns[b0], done = g_.meas_end_ns[last];
      // The forward thread's node at the engine's last end: it must hold the whole backward run.
      const NodeId n = last_node(*from, done - 1, done);
      if (n == kNoId || g_.meas_start_ns[n] > begin || g_.meas_end_ns[n] < done) continue;
      const NodeKind kind = g_.kind[n];
      if (kind != NodeKind::kCpuGap && kind != NodeKind::kCpuOp && kind != NodeKind::kCpuWait) continue;
      const int64_t t0 = g_.meas_start_ns[n], t1 = g_.meas_end_ns[n];
      g_.dur_ns[n] = std::clamp<int64_t>(t1 - done, 0, t1 - t0);
      forced_edges_.push_back(static_cast<uint32_t>(g_.edges.size()));
      add_edge(last, true, n, true, EdgeKind::kCrossThread);
      ++g_.stats.thread_waits;
      g_.stats.thread_wait_ns += done - t0;
      if (g_.stats.thread_wait_example.empty()) {
        const std::string what = kind == NodeKind::kCpuGap ? std::string("a gap")
                                                             : std::string(t.strings.view(t.events[g_.event[n]].name));
        g_.stats.thread_wait_example =
            fmt::format("{} on thread {}, {:.3f} ms, waits for thread {} (backward from {:.3f} ms to {:.3f} ms)", what,
                        g_.lanes[from->lane].tid, ms(t1 - t0), g_.lanes[to->lane].tid, ms(begin - t0),
                        ms(done - t0));
      }
    }
  }

  // Backward on the autograd engine's thread in a trace without fwdbwd flows (recorded by an older
  // PyTorch, or without them: the DLRM, trace_diff and ResNet traces of ../shared). The engine's thread
  // shows itself by its `autograd::engine::evaluate_function` frames, or in a trace of a PyTorch before 1.10 by
  // the backward functions themselves (`NllLossBackward`: trace::is_autograd_engine_frame). Where one node of a thread that
  // launches GPU work (a gap, or an op's self time with nothing recorded inside: `## backward ##`,
  // `ProfilerStep#N`) spans a run of the engine's work, that thread sat in backward(): the run starts
  // after the node does (where the thread entered it), and the node becomes a wait on the run's last
  // node, as with flows (add_thread_flows). A rank with any fwdbwd flow is left to them.
  void add_engine_waits(uint32_t r) {
    const RankTrace& t = ranks_[r];
    for (const Event& e : t.events) {
      if (e.flow_out != 0 || e.flow_in != 0) return;
    }
    std::vector<const CpuLaneNodes*> lanes;
    for (const CpuLaneNodes& ln : cpu_lanes_) {
      if (ln.rank == r) lanes.push_back(&ln);
    }
    if (lanes.size() < 2) return;
    std::vector<int8_t> engine_name(t.strings.size(), -1);
    // A lane's engine frames (trace::is_autograd_engine_frame: evaluate_function, or an older trace's
    // backward functions) (events, not nodes: a frame is cut into several nodes).
    auto engine_frames = [&](const CpuLaneNodes& ln) {
      int64_t count = 0;
      uint32_t last_event = kNoId;
      for (NodeId n = ln.first; n < ln.end; ++n) {
        if (g_.kind[n] != NodeKind::kCpuOp || g_.event[n] == kNoId || g_.event[n] == last_event) continue;
        last_event = g_.event[n];
        const StrId name = t.events[g_.event[n]].name;
        if (name >= engine_name.size()) continue;
        int8_t& k = engine_name[name];
        if (k < 0) k = trace::is_autograd_engine_frame(t.strings.view(name)) ? 1 : 0;
        count += k;
      }
      return count;
    };
    auto launches = [&](const CpuLaneNodes& ln) {
      for (NodeId n = ln.first; n < ln.end; ++n) {
        if (g_.kind[n] == NodeKind::kRuntime || g_.kind[n] == NodeKind::kSyncCall) return true;
      }
      return false;
    };
    // The engine's thread: the one with the most engine frames, and any with at least half as
    // many (a thread that ran a few itself, re-entrant backward on the caller's thread, is not one).
    std::vector<int64_t> frames(lanes.size());
    int64_t most = 0;
    for (size_t i = 0; i < lanes.size(); ++i) most = std::max(most, frames[i] = engine_frames(*lanes[i]));
    if (most == 0) return;
    std::vector<char> engine(lanes.size());
    for (size_t i = 0; i < lanes.size(); ++i) engine[i] = frames[i] > 0 && 2 * frames[i] >= most;
    for (size_t bi = 0; bi < lanes.size(); ++bi) {
      if (!engine[bi]) continue;
      const CpuLaneNodes& to = *lanes[bi];
      for (size_t ai = 0; ai < lanes.size(); ++ai) {
        if (engine[ai] || !launches(*lanes[ai])) continue;
        const CpuLaneNodes& from = *lanes[ai];
        // The node of `from` that holds [s, e) whole, if any.
        auto holding = [&](int64_t s0, int64_t e0) -> NodeId {
          auto it = std::lower_bound(g_.meas_start_ns.begin() + from.first, g_.meas_start_ns.begin() + from.end, s0 + 1);
          if (it == g_.meas_start_ns.begin() + from.first) return kNoId;
          const auto n = static_cast<NodeId>(std::prev(it) - g_.meas_start_ns.begin());
          return g_.meas_start_ns[n] <= s0 && g_.meas_end_ns[n] >= e0 ? n : kNoId;
        };
        // The engine's work (its nodes other than the gaps between runs), grouped by the node that holds it.
        std::vector<std::tuple<NodeId, NodeId, NodeId>> runs;  // (holding node, first, last)
        for (NodeId m = to.first; m < to.end; ++m) {
          if (g_.kind[m] == NodeKind::kCpuGap) continue;
          const NodeId n = holding(g_.meas_start_ns[m], g_.meas_end_ns[m]);
          if (n == kNoId) continue;
          if (!runs.empty() && std::get<0>(runs.back()) == n) {
            std::get<2>(runs.back()) = m;
          } else {
            runs.emplace_back(n, m, m);
          }
        }
        for (const auto& [n, first, last] : runs) {
          const NodeKind kind = g_.kind[n];
          if (kind != NodeKind::kCpuGap && kind != NodeKind::kCpuOp && kind != NodeKind::kCpuWait) continue;
          // The node held every node of the run (runs are grouped by their holding node).
          const int64_t t0 = g_.meas_start_ns[n], t1 = g_.meas_end_ns[n];
          const int64_t done = g_.meas_end_ns[last];
          add_edge(n, false, first, false, EdgeKind::kCrossThread);
          ++g_.stats.thread_flow_edges;
          g_.dur_ns[n] = std::clamp<int64_t>(t1 - done, 0, t1 - t0);
          forced_edges_.push_back(static_cast<uint32_t>(g_.edges.size()));
          add_edge(last, true, n, true, EdgeKind::kCrossThread);
          ++g_.stats.thread_waits;
          ++g_.stats.thread_waits_without_flows;
          g_.stats.thread_wait_ns += done - t0;
          if (g_.stats.thread_wait_example.empty()) {
            const std::string what = kind == NodeKind::kCpuGap ? std::string("a gap")
                                                                 : std::string(t.strings.view(t.events[g_.event[n]].name));
            g_.stats.thread_wait_example = fmt::format(
                "{} on thread {}, {:.3f} ms, waits for thread {} (backward from {:.3f} ms to {:.3f} ms; no fwdbwd "
                "flows: the engine's thread known by its engine frames)",
                what, g_.lanes[from.lane].tid, ms(t1 - t0), g_.lanes[to.lane].tid, ms(g_.meas_start_ns[first] - t0),
                ms(done - t0));
          }
        }
      }
    }
  }

  // Threads that only wait: in a rank where some thread launches GPU work (a call
  // that a GPU op's correlation names, or a launch call whose op is not in the
  // trace), a thread that launches none and does not hold the step's ProfilerStep has no
  // dependency into the GPU work the trace can show (Kineto records no
  // dependency between threads), so it cannot hold the step back: its nodes are
  // replayed but left out of the step's span and critical path. The
  // ProfilerStep's thread is the training loop that starts the other threads'
  // work, so it is kept even where it launches nothing itself.
  void mark_waiting_threads() {
    std::vector<uint8_t> working(g_.lanes.size(), 0);
    std::vector<uint8_t> rank_launches(ranks_.size(), 0);
    for (uint32_t r = 0; r < ranks_.size(); ++r) {
      const RankTrace& t = ranks_[r];
      std::vector<int8_t> launch_name(t.strings.size(), -1);  // per name, computed once
      for (NodeId rt : idx_[r].runtime_nodes) {
        const Event& call = t.events[g_.event[rt]];
        bool launches = false;
        if (call.correlation != trace::kNone) {
          auto [gb, ge] = idx_[r].gpu_ops_of(call.correlation);
          launches = gb != ge;
          // The rule applies to ranks whose traced GPU work has a launching thread.
          if (launches) rank_launches[r] = 1;
        }
        if (!launches && call.name < launch_name.size()) {
          // A launch whose GPU op the trace lost (or that ran outside the step) still launched.
          int8_t& l = launch_name[call.name];
          if (l < 0) l = is_launch_call(t.strings.view(call.name)) ? 1 : 0;
          launches = l == 1;
        }
        if (launches) working[g_.lane[rt]] = 1;
      }
    }
    for (const CpuLaneNodes& ln : cpu_lanes_) {
      const RankTrace& t = ranks_[ln.rank];
      for (NodeId n = ln.first; n < ln.end && !working[ln.lane]; ++n) {
        if (g_.event[n] == kNoId) continue;
        const Event& e = t.events[g_.event[n]];
        if (e.kind == EventKind::kUserAnnotation && t.strings.view(e.name).substr(0, 13) == "ProfilerStep#") {
          working[ln.lane] = 1;
        }
      }
    }
    for (const CpuLaneNodes& ln : cpu_lanes_) {
      if (working[ln.lane] || !rank_launches[ln.rank]) continue;
      const RankTrace& t = ranks_[ln.rank];
      uint32_t longest = kNoId;
      for (NodeId n = ln.first; n < ln.end; ++n) {
        g_.on_waiting_thread[n] = 1;
        const uint32_t ev = g_.event[n];
        if (ev != kNoId && (longest == kNoId || t.events[ev].dur_ns > t.events[longest].dur_ns)) longest = ev;
      }
      ++g_.stats.waiting_threads;
      g_.stats.waiting_thread_nodes += ln.end - ln.first;
      if (g_.stats.waiting_thread_example.empty()) {
        g_.stats.waiting_thread_example =
            longest == kNoId ? fmt::format("thread {}", g_.lanes[ln.lane].tid)
                             : fmt::format("thread {}: {} ({:.3f} ms)", g_.lanes[ln.lane].tid,
                                           t.strings.view(t.events[longest].name), ms(t.events[longest].dur_ns));
      }
    }
    // Blocked-wait frames where they matter: on threads that do work.
    for (const OuterWait& w : outer_waits_) {
      if (!working[w.lane] && rank_launches[w.rank]) continue;
      const RankTrace& t = ranks_[w.rank];
      ++g_.stats.wait_frames;
      if (g_.stats.wait_frame_example.empty()) {
        g_.stats.wait_frame_example = fmt::format("{} (thread {}), {:.3f} ms", t.strings.view(t.events[w.event].name),
                                                  g_.lanes[w.lane].tid, ms(t.events[w.event].dur_ns));
      }
    }
    for (NodeId n = 0; n < g_.num_nodes(); ++n) {
      if (g_.kind[n] == NodeKind::kCpuWait && !g_.on_waiting_thread[n]) g_.stats.wait_frame_ns += g_.dur_ns[n];
    }
  }

  // How much the threads that only wait stretched the measured span.
  void count_waiting_span() {
    if (g_.stats.waiting_threads == 0) return;
    int64_t b = std::numeric_limits<int64_t>::max(), e = std::numeric_limits<int64_t>::min();
    for (NodeId n = 0; n < g_.num_nodes(); ++n) {
      b = std::min(b, g_.meas_start_ns[n]);
      e = std::max(e, g_.meas_end_ns[n]);
    }
    g_.stats.waiting_thread_span_ns = std::max<int64_t>(0, (e - b) - (g_.measured_end_ns() - g_.measured_begin_ns()));
  }

  // Collectives: one logical node per collective matched across ranks. Each
  // rank's kernel starts on its own; the transfer starts when the last rank
  // has arrived; every rank's kernel ends when the transfer ends. So a fast
  // rank's kernel is mostly waiting (slack), and a slow rank delays everyone.
  void add_collectives() {
    // Each rank's communication kernels, in rank and node order, as the matching's records.
    std::vector<NodeId> node_of_record;
    std::vector<CommRecord> records;
    for (NodeId n = 0; n < g_.num_nodes(); ++n) {
      if (g_.kind[n] != NodeKind::kCommKernel) continue;
      const RankTrace& t = ranks_[g_.rank[n]];
      const trace::CollectiveArgs& ca = t.collectives[t.events[g_.event[n]].collective];
      CommRecord c;
      c.rank = g_.rank[n];
      c.process_group = std::string(t.strings.view(ca.process_group));
      c.collective = std::string(t.strings.view(ca.collective));
      c.seq = ca.seq;
      c.matchable = ca.matchable;
      c.group_size = ca.group_size;
      c.start_ns = g_.meas_start_ns[n];
      c.end_ns = g_.meas_end_ns[n];
      records.push_back(std::move(c));
      node_of_record.push_back(n);
    }
    const CollectiveMatch match = match_collectives(records, ranks_.size(), g_.rank_ids);
    g_.stats.collectives_unmatched += match.unmatched;
    g_.stats.collectives_inconsistent += match.inconsistent;
    if (g_.stats.collectives_inconsistent_example.empty()) {
      g_.stats.collectives_inconsistent_example = match.inconsistent_example;
    }
    if (ranks_.size() < 2) return;
    shift_ranks(match.offsets);
    for (uint32_t r = 0; r < ranks_.size(); ++r) {
      if (match.aligned[r]) aligned_.insert(r);
    }
    for (const MatchedCollective& mc : match.collectives) {
      const NodeId first = node_of_record[mc.members[0]];
      NodeId c = add_node(NodeKind::kCollective, kNoId, g_.rank[first], kNoId, g_.name[first], mc.start_ns, mc.end_ns);
      for (uint32_t i : mc.members) {
        const NodeId n = node_of_record[i];
        add_edge(n, false, c, false, EdgeKind::kCollective);
        add_edge(c, true, n, true, EdgeKind::kCollective);
        g_.dur_ns[n] = 0;  // the kernel's own time is all wait + transfer
      }
      ++g_.stats.collectives_matched;
      for (uint32_t i : mc.members) unite(g_.rank[first], g_.rank[node_of_record[i]]);
    }
  }

  uint32_t find(uint32_t r) {
    while (joined_[r] != r) r = joined_[r] = joined_[joined_[r]];
    return r;
  }
  void unite(uint32_t a, uint32_t b) {
    if (joined_.empty()) {
      joined_.resize(ranks_.size());
      for (uint32_t r = 0; r < joined_.size(); ++r) joined_[r] = r;
    }
    a = find(a), b = find(b);
    if (a != b) joined_[std::max(a, b)] = std::min(a, b);
  }

  // Ranks joined by matched collectives form one job; several groups that share none, with steps of
  // different lengths, are separate jobs (or their collectives went unmatched): BuildStats::rank_groups.
  void count_rank_groups() {
    if (ranks_.size() < 2) return;
    if (joined_.empty()) unite(0, 0);
    std::vector<uint32_t> roots(ranks_.size());
    for (uint32_t r = 0; r < ranks_.size(); ++r) roots[r] = find(r);
    const auto [first, last] = rank_extents();
    rank_group_stats(roots, g_.rank_ids, first, last, g_.stats);
  }
  // The groups of ranks (`roots`: each rank's group, named by its first rank) and their measured spans
  // from each rank's first start and last end.
  static void rank_group_stats(const std::vector<uint32_t>& roots, const std::vector<int>& ids,
                               const std::vector<int64_t>& rank_first, const std::vector<int64_t>& rank_last,
                               BuildStats& s) {
    std::vector<int64_t> first(roots.size(), kMaxI), last(roots.size(), kMin);
    std::map<uint32_t, std::vector<int>> members;  // by the group's first rank
    for (size_t r = 0; r < roots.size(); ++r) {
      const uint32_t root = roots[r] < roots.size() ? roots[r] : uint32_t(r);
      first[root] = std::min(first[root], rank_first[r]);
      last[root] = std::max(last[root], rank_last[r]);
      members[root].push_back(ids[r]);
    }
    s.rank_groups = static_cast<int64_t>(members.size());
    if (members.size() < 2) return;
    std::string text;
    int shown = 0;
    for (auto& [root, group] : members) {
      if (first[root] == kMaxI) continue;
      const int64_t span = last[root] - first[root];
      s.rank_group_span_min_ns = shown == 0 ? span : std::min(s.rank_group_span_min_ns, span);
      s.rank_group_span_max_ns = std::max(s.rank_group_span_max_ns, span);
      if (shown++ < 4) {
        std::sort(group.begin(), group.end());
        text += fmt::format("{}{} {}{}: {:.3f} ms", text.empty() ? "" : "; ", group.size() == 1 ? "rank" : "ranks",
                            group.front(),
                            group.size() == 1 ? "" : fmt::format("..{} ({})", group.back(), group.size()),
                            double(span) * 1e-6);
      }
    }
    if (shown > 4) text += fmt::format("; {} more", shown - 4);
    s.rank_groups_example = text;
  }

  // Each rank's nodes moved earlier by its offset, in one pass over the nodes.
  void shift_ranks(const std::vector<int64_t>& offsets) {
    if (std::all_of(offsets.begin(), offsets.end(), [](int64_t o) { return o == 0; })) return;
    for (NodeId n = 0; n < g_.num_nodes(); ++n) {
      const int64_t offset = offsets[g_.rank[n]];
      g_.meas_start_ns[n] -= offset;
      g_.meas_end_ns[n] -= offset;
    }
    for (size_t r = 0; r < offsets.size(); ++r) g_.rank_offset_ns[r] += offsets[r];
  }

  // Ranks with no matched collective share no clock: start them with rank 0.
  void align_ranks_without_collectives() {
    if (ranks_.size() < 2) return;
    constexpr int64_t kUnset = std::numeric_limits<int64_t>::max();
    std::vector<int64_t> first(ranks_.size(), kUnset);
    for (NodeId n = 0; n < g_.num_nodes(); ++n) {
      if (g_.counts_for_span(n)) first[g_.rank[n]] = std::min(first[g_.rank[n]], g_.meas_start_ns[n]);
    }
    bool any = false;
    std::vector<int64_t> offsets(ranks_.size(), 0);
    for (uint32_t r = 1; r < ranks_.size(); ++r) {
      if (aligned_.count(r) || first[r] == kUnset || first[0] == kUnset) continue;
      offsets[r] = first[r] - first[0];
      any = true;
    }
    shift_ranks(offsets);
    if (any) {
      g_.stats.notes.push_back(kAlignNote);
    }
  }

  // ---------- latencies ----------
  int64_t meas(PointId p) const {
    return is_end(p) ? g_.meas_end_ns[node_of(p)] : g_.meas_start_ns[node_of(p)];
  }

  // GPU ops whose binding edge (their launch, their stream's op before, an event wait) leaves them a wait of
  // kQueuedWaitMinNs or more on work launched before the step (trace::waited_on_prior_work: their stream's,
  // ending as they start or running 90 % of the wait): queued behind an earlier step's work still on a GPU
  // that runs behind its host (Graph::queued_ops). The wait stays in the graph (the edge's measured
  // latency, as every binding edge's), but it is no inherent latency: marked, to leave it out of the medians.
  std::vector<uint8_t> queued_waits(const std::vector<uint32_t>& binding) {
    std::vector<uint8_t> queued(g_.edges.size(), 0);
    for (PointId p = 0; p < binding.size(); ++p) {
      if (binding[p] == kNoId || binding[p] >= g_.edges.size() || is_end(p)) continue;
      const Edge& e = g_.edges[binding[p]];
      const NodeId n = node_of(p);
      if (!is_gpu(g_.kind[n]) || g_.lane[n] >= g_.lanes.size()) continue;
      if (e.kind != EdgeKind::kLaunch && e.kind != EdgeKind::kStream && e.kind != EdgeKind::kCrossStream) continue;
      const int64_t from = meas(e.src), start = meas(p);
      if (start - from < kQueuedWaitMinNs) continue;
      const uint32_t r = g_.rank[n];
      const graph::Lane& lane = g_.lanes[g_.lane[n]];
      const int64_t shift = rank_base_[r] - g_.rank_offset_ns[r];
      if (!trace::waited_on_prior_work(ranks_[r].prior_gpu_busy, lane.device, lane.stream, from - shift, start - shift))
        continue;
      queued[binding[p]] = 1;
      g_.queued_ops.push_back(n);
      ++g_.stats.queued_waits;
      if (start - from > g_.stats.queued_wait_ns) {
        g_.stats.queued_wait_ns = start - from;
        g_.stats.queued_wait_example = fmt::format(
            "{} on rank {} stream {}, waited {:.3f} ms", std::string(g_.strings.view(g_.name[n])),
            g_.rank_ids[r], g_.lanes[g_.lane[n]].stream, static_cast<double>(start - from) / 1e6);
      }
    }
    return queued;
  }

  // A loop whose GPU tail runs free into the next step's host time (Graph::gpu_tail_loop): every rank with
  // GPU work passes trace::runs_free_gpu_tail on its own host's and GPU's measured spans, and no op is
  // queued behind an earlier step's work (that loop is timed by its queued ops).
  void find_gpu_tail_loop() {
    if (!g_.queued_ops.empty()) return;
    const TailPart t = gpu_tail_part();
    if (!t.ok) return;
    g_.gpu_tail_loop = t.any;
    g_.stats.gpu_tail_ns = t.any ? t.tail_ns : 0;
  }
  // This graph's ranks' part of it, queued ops aside: whether each rank with GPU work passes, whether any
  // has GPU work, and the longest tail.
  struct TailPart {
    bool ok = false;
    bool any = false;
    int64_t tail_ns = 0;
  };
  TailPart gpu_tail_part() const {
    constexpr int64_t kNone = std::numeric_limits<int64_t>::max(), kNoEnd = std::numeric_limits<int64_t>::min();
    const size_t n_ranks = ranks_.size();
    std::vector<int64_t> h0(n_ranks, kNone), h1(n_ranks, kNoEnd), gpu_end(n_ranks, kNoEnd);
    for (NodeId n = 0; n < g_.num_nodes(); ++n) {
      if (!g_.counts_for_span(n) || g_.kind[n] == NodeKind::kCollective || g_.rank[n] >= n_ranks) continue;
      const uint32_t r = g_.rank[n];
      if (is_gpu(g_.kind[n])) {
        gpu_end[r] = std::max(gpu_end[r], g_.meas_end_ns[n]);
      } else {
        h0[r] = std::min(h0[r], g_.meas_start_ns[n]);
        h1[r] = std::max(h1[r], g_.meas_end_ns[n]);
      }
    }
    TailPart out;
    for (size_t r = 0; r < n_ranks; ++r) {
      if (gpu_end[r] == kNoEnd) continue;
      if (h0[r] == kNone) return {};
      const int64_t shift = rank_base_[r] - g_.rank_offset_ns[r];
      if (!trace::runs_free_gpu_tail(ranks_[r], h0[r] - shift, h1[r] - shift, gpu_end[r] - shift)) return {};
      out.tail_ns = std::max(out.tail_ns, gpu_end[r] - h1[r]);
      out.any = true;
    }
    out.ok = true;
    return out;
  }

  // The inherent latency of each edge kind and each edge's latency. In a part, the edges into its points
  // from other processes' points compete for their point too (ref E + j: remote_[remote_in[j]]), in the
  // place the whole graph gives them, so that ties between gaps go as they go there.
  Status assign_latencies() {
    const size_t points = g_.num_points();
    const auto E = static_cast<uint32_t>(g_.edges.size());
    std::vector<uint32_t> remote_in;
    for (uint32_t i = 0; i < remote_.size(); ++i) {
      if (remote_[i].edge.into_local) remote_in.push_back(i);
    }
    const auto refs = static_cast<uint32_t>(E + remote_in.size());
    const auto dst_of = [&](uint32_t f) { return f < E ? g_.edges[f].dst : remote_[remote_in[f - E]].edge.local; };
    const auto src_time = [&](uint32_t f) {
      return f < E ? meas(g_.edges[f].src) : remote_[remote_in[f - E]].other_meas;
    };
    const auto kind_of = [&](uint32_t f) { return f < E ? g_.edges[f].kind : remote_[remote_in[f - E]].edge.kind; };
    // Group edges by destination point (counting sort), in the whole graph's order: into one point, the edges
    // from other processes come after this part's (a collective's members on processes after its owner's,
    // a kernel's collective edge after its rank's edges).
    std::vector<uint32_t> off(points + 1, 0);
    for (uint32_t f = 0; f < refs; ++f) ++off[dst_of(f) + 1];
    std::partial_sum(off.begin(), off.end(), off.begin());
    std::vector<uint32_t> order(refs);
    {
      std::vector<uint32_t> fill(off.begin(), off.end() - 1);
      for (uint32_t f = 0; f < refs; ++f) order[fill[dst_of(f)]++] = f;
    }
    // Binding edge of each point: the one with the smallest measured gap. For
    // an end point, the node's own duration competes too (gap = measured dur - dur).
    constexpr int kKinds = kEdgeKinds;
    std::vector<std::vector<int64_t>> binding_gaps(kKinds);
    std::vector<uint32_t> binding(points, kNoId);
    std::vector<uint8_t> drop(refs, 0);
    std::vector<int64_t> best_gap(points, 0);
    for (PointId p = 0; p < points; ++p) {
      int64_t best = std::numeric_limits<int64_t>::max();
      if (is_end(p)) {
        NodeId n = node_of(p);
        best = g_.meas_end_ns[n] - g_.meas_start_ns[n] - g_.dur_ns[n];
      }
      for (uint32_t k = off[p]; k < off[p + 1]; ++k) {
        const uint32_t f = order[k];
        int64_t gap = meas(p) - src_time(f);
        const EdgeKind kind = kind_of(f);
        if (gap < -kContradictionToleranceNs && kind != EdgeKind::kThread && kind != EdgeKind::kStream) {
          drop[f] = 1;
          ++g_.stats.edges_dropped_inconsistent;
          continue;
        }
        if (gap < best) {
          best = gap;
          binding[p] = f;
        }
      }
      best_gap[p] = best;
    }
    // A wait for an earlier step's queued work is no launch latency: left out of the medians too.
    const std::vector<uint8_t> queued = queued_waits(binding);
    for (PointId p = 0; p < points; ++p) {
      if (binding[p] == kNoId || (binding[p] < E && queued[binding[p]])) continue;
      binding_gaps[static_cast<int>(kind_of(binding[p]))].push_back(std::max<int64_t>(0, best_gap[p]));
    }
    int64_t inherent[kKinds];
    if (comm_) {
      auto medians = dist::upper_medians(*comm_, kTagMedians, binding_gaps, int64_t{0});
      if (!medians) return medians.error();
      if (medians->size() != size_t(kKinds)) return make_error("", "the edge latencies' medians arrived cut short");
      std::copy(medians->begin(), medians->end(), inherent);
    } else {
      for (int k = 0; k < kKinds; ++k) inherent[k] = upper_median(binding_gaps[k], int64_t{0});
    }
    inherent[static_cast<int>(EdgeKind::kThread)] = 0;
    inherent[static_cast<int>(EdgeKind::kCollective)] = 0;
    std::copy(inherent, inherent + kKinds, g_.inherent_lat_ns);
    // A polling loop's wait keeps its measured wake-up whether or not it bound
    // its point: the loop's own time was given to the wait (make_poll_wait).
    std::vector<uint8_t> forced(E, 0);
    for (uint32_t i : forced_edges_) forced[i] = 1;
    for (uint32_t i = 0; i < E; ++i) {
      Edge& e = g_.edges[i];
      int64_t gap = std::max<int64_t>(0, meas(e.dst) - meas(e.src));
      e.lat_ns = binding[e.dst] == i || forced[i] ? gap : std::min(gap, inherent[static_cast<int>(e.kind)]);
    }
    for (uint32_t j = 0; j < remote_in.size(); ++j) {
      Remote& r = remote_[remote_in[j]];
      const int64_t gap = std::max<int64_t>(0, meas(r.edge.local) - r.other_meas);
      r.edge.lat_ns = binding[r.edge.local] == E + j ? gap : std::min(gap, inherent[static_cast<int>(r.edge.kind)]);
      r.dropped = drop[E + j] != 0;
    }
    if (std::count(drop.begin(), drop.begin() + E, 1) > 0) {
      size_t w = 0;
      for (size_t i = 0; i < E; ++i) {
        if (!drop[i]) g_.edges[w++] = g_.edges[i];
      }
      g_.edges.resize(w);
    }
    return {};
  }

  Status finish_csr_and_topo() {
    const size_t points = g_.num_points();
    auto csr = [&](bool by_dst, std::vector<uint32_t>& offsets, std::vector<uint32_t>& ids) {
      offsets.assign(points + 1, 0);
      for (const Edge& e : g_.edges) ++offsets[(by_dst ? e.dst : e.src) + 1];
      std::partial_sum(offsets.begin(), offsets.end(), offsets.begin());
      ids.resize(g_.edges.size());
      std::vector<uint32_t> fill(offsets.begin(), offsets.end() - 1);
      for (uint32_t i = 0; i < g_.edges.size(); ++i) ids[fill[by_dst ? g_.edges[i].dst : g_.edges[i].src]++] = i;
    };
    csr(true, g_.in_offsets, g_.in_edges);
    csr(false, g_.out_offsets, g_.out_edges);
    // Kahn's algorithm over points; the implicit edge start(n) -> end(n) counts too.
    std::vector<uint32_t> indeg(points, 0);
    for (PointId p = 0; p < points; ++p) indeg[p] = g_.in_offsets[p + 1] - g_.in_offsets[p] + (is_end(p) ? 1 : 0);
    g_.topo.clear();
    g_.topo.reserve(points);
    for (PointId p = 0; p < points; ++p) if (indeg[p] == 0) g_.topo.push_back(p);
    for (size_t head = 0; head < g_.topo.size(); ++head) {
      PointId p = g_.topo[head];
      if (!is_end(p) && --indeg[p + 1] == 0) g_.topo.push_back(p + 1);
      for (uint32_t k = g_.out_offsets[p]; k < g_.out_offsets[p + 1]; ++k) {
        PointId d = g_.edges[g_.out_edges[k]].dst;
        if (--indeg[d] == 0) g_.topo.push_back(d);
      }
    }
    if (g_.topo.size() != points) {
      std::string names;
      int shown = 0;
      for (PointId p = 0; p < points && shown < 4; ++p) {
        if (indeg[p] == 0 || is_end(p)) continue;
        NodeId n = node_of(p);
        names += (shown ? ", " : "") + std::string(g_.strings.view(g_.name[n])) + " (" + to_string(g_.kind[n]) + ")";
        ++shown;
      }
      return make_error(ranks_[0].path, "dependency cycle among " + std::to_string(points - g_.topo.size()) +
                                            " graph points, e.g. " + names,
                        "the trace's correlations or event records contradict each other");
    }
    if (improper_nesting_ > 0 && !comm_) g_.stats.notes.push_back(improper_note(improper_nesting_));
    return {};
  }

  const std::vector<RankTrace>& ranks_;
  BuildOptions options_;
  Graph g_;
  std::vector<RankIndex> idx_;
  std::vector<int64_t> rank_base_;
  std::vector<std::vector<StrId>> name_map_;
  std::unordered_map<uint64_t, uint32_t> lane_map_;
  std::set<uint32_t> aligned_;
  std::vector<uint32_t> joined_;  // union-find of ranks over matched collectives (empty: none)
  int64_t improper_nesting_ = 0;
  std::vector<CpuLaneNodes> cpu_lanes_;
  std::vector<OuterWait> outer_waits_;
  std::vector<uint32_t> forced_edges_;  // poll-wait edges: they keep their measured latency
  // A part (build_part): the run's processes, where this part's ranks and nodes sit in the whole graph,
  // its edges with other processes' points.
  dist::Comm* comm_ = nullptr;
  size_t first_rank_ = 0, total_ranks_ = 0, lane_base_ = 0, total_lanes_ = 0, total_rank_nodes_ = 0;
  std::vector<size_t> node_base_of_;  // per process, then the ranks' nodes in all
  int64_t collectives_total_ = 0;
  std::vector<NodeId> global_;
  struct Remote {
    RemoteEdge edge;
    int64_t other_meas = 0;  // the other point's measured time (an edge into this part)
    bool dropped = false;
  };
  std::vector<Remote> remote_;
  std::vector<uint32_t> joined_all_;  // per rank of the step, its group's first rank
  bool align_note_ = false, queued_loop_ = false;
};

}  // namespace

Result<Graph> build_graph(const std::vector<trace::RankTrace>& ranks, const BuildOptions& options) {
  Builder b(ranks, options);
  return b.build();
}

Result<GraphPart> build_part(const std::vector<trace::RankTrace>& ranks, dist::Comm& comm,
                             const BuildOptions& options) {
  Builder b(ranks, options, &comm);
  return b.build_part();
}

}  // namespace emo::graph
