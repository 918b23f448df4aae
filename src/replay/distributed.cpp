// The replay shared by processes (include/emo/replay/distributed.h): each process sweeps its own points and
// exchanges the times that cross between processes in batches, sent before it waits.
#include "emo/replay/distributed.h"

#include "path.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <limits>
#include <numeric>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace emo::replay {

using graph::NodeId;
using graph::NodeKind;
using graph::PointId;

namespace {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
// Message tags of the distributed replay (the reading's are 10 and 11, analyze_part's 12: src/analysis/analysis.cpp;
// the builder's 40-45).
constexpr int kTagForward = 20;
constexpr int kTagBackward = 21;
constexpr int kTagGather = 22;
constexpr int kTagPath = 23;        // the critical path's walk handed to the process of the point it reached
constexpr int kTagPathPieces = 24;  // every process's pieces of the path, gathered
// A batch goes out at the latest this many points after its first value (else when the process waits).
constexpr uint32_t kFlushEvery = 4096;

// Every process's part, combined at process 0, the combination to every process (dist::all_combine).
template <class Combine>
Result<std::vector<int64_t>> all_combine(dist::Comm& comm, const std::vector<int64_t>& mine, Combine&& combine) {
  auto r = dist::all_combine(comm, kTagGather, mine, combine);
  if (!r) return make_error("", "the replay's span: " + r.error().message());
  return r;
}

// One sweep of a shard's points in one direction. The first on a shard runs in dataflow order: each local
// point is computed as soon as every value it depends on is known (its own process's or another's), and
// batches of this process's values go to the processes that read them before it waits (any process's). Any
// process that is waiting has sent all it knows, so the earliest point not yet computed (in any topological
// order of the whole graph) always has its values on their way to its process: the processes never wait on
// one another in a circle, and no process needs a global order of the points. The order each process
// computed its points in is then one global topological order's parts (a point is computed after every
// point it depends on, on any process), so later sweeps go through it as it is (and backward in reverse),
// waiting only for the values a point reads from others: no counts of what is pending, no queue.
//
// A sweep carries `width` values per point (several plans replayed side by side, one exchange for all):
// val_[point · width + i] is plan i's, and `value(p, out)` writes point p's `width` values at `out`.
class Sweep {
 public:
  Sweep(const Shard& s, const ShardSide& side, dist::Comm& comm, int tag, std::vector<int64_t>& val, size_t width = 1)
      : s_(s), side_(side), comm_(comm), tag_(tag), val_(val), w_(width), have_(side.imports.size(), 0),
        outbox_(size_t(std::max(1, s.processes))) {
    val_.assign((s.num_points() + side.imports.size()) * w_, 0);
  }
  // Runs `value(p, out)` for every local point once, each after every value it depends on (val_) is known,
  // in dataflow order; `order` gets the order. `forward`: a node's end depends on its start (the run); else
  // its start on its end (the slack).
  template <class Value>
  Status run_dataflow(bool forward, std::vector<uint32_t>& order, Value&& value) {
    const auto np = uint32_t(s_.num_points());
    pending_.resize(np);
    order.clear();
    order.reserve(np);
    for (uint32_t p = 0; p < np; ++p) {
      pending_[p] = side_.dep_off[p + 1] - side_.dep_off[p] + (forward ? (p & 1u) : 1u - (p & 1u));
      if (pending_[p] == 0) order.push_back(p);
    }
    size_t head = 0;
    while (head < np) {
      if (head == order.size()) {
        EMO_RETURN_IF_ERROR(receive(-1, &order));
        continue;
      }
      const uint32_t p = order[head++];
      value(p, &val_[size_t(p) * w_]);
      if (computed(p)) EMO_RETURN_IF_ERROR(flush());
      if (forward ? !(p & 1u) : (p & 1u)) release(forward ? p + 1 : p - 1, order);
      release_readers(p, order);
    }
    return flush();
  }
  // The same in a given order (a topological one the processes share), forward or in reverse.
  template <class Value>
  Status run_ordered(const std::vector<uint32_t>& order, bool reverse, Value&& value) {
    const size_t np = s_.num_points();
    for (size_t k = 0; k < np; ++k) {
      const uint32_t p = order[reverse ? np - 1 - k : k];
      if (side_.reads_import[p]) {
        for (uint32_t d = side_.dep_off[p]; d < side_.dep_off[p + 1]; ++d) {
          const uint32_t dep = side_.dep[d];
          if (dep < np) continue;
          while (!have_[dep - np]) EMO_RETURN_IF_ERROR(receive(side_.import_from[dep - np], nullptr));
        }
      }
      value(p, &val_[size_t(p) * w_]);
      if (computed(p)) EMO_RETURN_IF_ERROR(flush());
    }
    return flush();
  }
  int64_t sent = 0, waits = 0;

 private:
  // Point `p`'s value is known: queued for the processes that read it, to be sent once this process has
  // computed kFlushEvery points more (the readers need not wait until this process waits itself).
  // True when the batches are to go now.
  bool computed(uint32_t p) {
    for (uint32_t k = side_.to_off[p]; k < side_.to_off[p + 1]; ++k) {
      auto& box = outbox_[size_t(side_.to[k])];
      box.push_back(int64_t(s_.global_point(p)));
      box.insert(box.end(), val_.begin() + ptrdiff_t(size_t(p) * w_), val_.begin() + ptrdiff_t(size_t(p + 1) * w_));
      queued_ = true;
    }
    return queued_ && ++since_queued_ >= kFlushEvery;
  }
  void release(uint32_t p, std::vector<uint32_t>& ready) {
    if (--pending_[p] == 0) ready.push_back(p);
  }
  void release_readers(uint32_t i, std::vector<uint32_t>& ready) {
    for (uint32_t k = side_.next_off[i]; k < side_.next_off[i + 1]; ++k) release(side_.next[k], ready);
  }
  Status flush() {
    for (size_t q = 0; q < outbox_.size(); ++q) {
      if (outbox_[q].empty()) continue;
      EMO_RETURN_IF_ERROR(comm_.send(int(q), tag_, dist::to_bytes(outbox_[q])));
      outbox_[q].clear();
      ++sent;
    }
    queued_ = false;
    since_queued_ = 0;
    return {};
  }
  // What this process knows goes first, then it waits for the next batch of process `from` (-1: of any);
  // `ready` (dataflow) gets the points the batch makes ready.
  Status receive(int from, std::vector<uint32_t>* ready) {
    EMO_RETURN_IF_ERROR(flush());
    ++waits;
    Result<std::pair<int, std::string>> m = make_error("", "");
    if (from < 0) {
      m = comm_.recv_any(tag_, dist::timeout_s());
    } else {
      auto bytes = comm_.recv(from, tag_, dist::timeout_s());
      if (bytes) m = std::pair<int, std::string>{from, std::move(*bytes)};
      else m = bytes.error();
    }
    if (!m) {
      std::vector<int32_t> waited;
      for (size_t j = 0; j < have_.size(); ++j) {
        if (!have_[j]) waited.push_back(side_.import_from[j]);
      }
      std::sort(waited.begin(), waited.end());
      waited.erase(std::unique(waited.begin(), waited.end()), waited.end());
      return make_error("", fmt::format("the distributed replay: {}; process {} waits for the times of process {}",
                                        m.error().message(), s_.process, fmt::join(waited, ", ")));
    }
    const int sender = m->first;
    auto v = dist::from_bytes(m->second, sender);
    if (!v || v->size() % (1 + w_) != 0) {
      return make_error("", fmt::format("process {} sent a replay message cut short", sender));
    }
    const size_t np = s_.num_points();
    for (size_t i = 0; i < v->size(); i += 1 + w_) {
      const auto it = std::lower_bound(side_.imports.begin(), side_.imports.end(), PointId((*v)[i]));
      const size_t j = size_t(it - side_.imports.begin());
      if ((*v)[i] < 0 || it == side_.imports.end() || int64_t(*it) != (*v)[i] || side_.import_from[j] != sender ||
          have_[j]) {
        return make_error("", fmt::format("process {} sent the time of a point {} that it does not share with "
                                          "process {}: the processes hold parts of different graphs",
                                          sender, (*v)[i], s_.process));
      }
      std::copy_n(v->begin() + ptrdiff_t(i + 1), w_, val_.begin() + ptrdiff_t((np + j) * w_));
      have_[j] = 1;
      if (ready) release_readers(uint32_t(np + j), *ready);
    }
    return {};
  }
  const Shard& s_;
  const ShardSide& side_;
  dist::Comm& comm_;
  int tag_;
  std::vector<int64_t>& val_;
  size_t w_;
  std::vector<uint8_t> have_;
  std::vector<std::vector<int64_t>> outbox_;
  std::vector<uint32_t> pending_;
  bool queued_ = false;      // values wait in the outboxes
  uint32_t since_queued_ = 0;  // points computed since the first of them
};

uint64_t next_shard_id() {
  static std::atomic<uint64_t> last{0};
  return ++last;
}

int64_t dur_of(const Shard& s, const std::vector<int64_t>& dur_ns, uint32_t node) {
  return dur_ns.empty() ? s.dur_ns[node] : dur_ns[node];
}

// The span's parts a process knows (see combine_span): [begin, end, last (the lowest point at the end), 0,
// host's first start, host's last end, the node ending it, the queued ops' first start, then per lane of
// this process's: lane, first start, last end, the node ending it].
std::vector<int64_t> span_part(const Shard& s, const std::vector<int64_t>& t) {
  int64_t begin = kMax, end = kMin, last = 0;
  for (uint32_t p = 0; p < s.num_points(); ++p) {
    if (!s.counts[p / 2]) continue;
    if (!(p & 1u)) {
      begin = std::min(begin, t[p]);
    } else if (t[p] > end || (t[p] == end && s.global_point(p) < last)) {
      end = t[p];
      last = s.global_point(p);
    }
  }
  std::vector<int64_t> part{begin, end, last, 0, kMax, kMin, 0, kMax};
  if (!s.queued_loop && !s.gpu_tail_loop) return part;
  std::vector<int64_t> s0(s.lanes, kMax), s1(s.lanes, kMin), s_last(s.lanes, 0);
  for (uint32_t i = 0; i < s.num_nodes(); ++i) {
    if (!s.counts[i]) continue;
    const int64_t a = t[2 * i], b = t[2 * i + 1];
    if (s.cls[i] == 0) {
      part[4] = std::min(part[4], a);
      if (b > part[5]) part[5] = b, part[6] = s.nodes[i];
    } else if (s.cls[i] == 1 && s.lane[i] < s.lanes) {
      const uint32_t l = s.lane[i];
      s0[l] = std::min(s0[l], a);
      if (b > s1[l]) s1[l] = b, s_last[l] = s.nodes[i];
    }
    if (s.queued[i]) part[7] = std::min(part[7], a);
  }
  for (size_t l = 0; l < s.lanes; ++l) {
    if (s1[l] == kMin) continue;
    part.insert(part.end(), {int64_t(l), s0[l], s1[l], s_last[l]});
  }
  return part;
}

// The step's [begin, end, last point] from every process's span_part, as Replayer::run() finds it
// (graph::loop_window for a loop's period).
std::vector<int64_t> combine_span(const Shard& s, const std::vector<std::vector<int64_t>>& parts) {
  int64_t begin = kMax, end = kMin, last = 0, h0 = kMax, h1 = kMin, h_node = kMax, anchor = kMax;
  std::vector<std::array<int64_t, 4>> lanes;
  for (const auto& v : parts) {
    if (v.size() < 8) continue;
    begin = std::min(begin, v[0]);
    if (v[1] > end || (v[1] == end && v[1] != kMin && v[2] < last)) end = v[1], last = v[2];
    h0 = std::min(h0, v[4]);
    if (v[5] > h1 || (v[5] == h1 && v[5] != kMin && v[6] < h_node)) h1 = v[5], h_node = v[6];
    anchor = std::min(anchor, v[7]);
    for (size_t i = 8; i + 3 < v.size(); i += 4) lanes.push_back({v[i], v[i + 1], v[i + 2], v[i + 3]});
  }
  if (s.graph_points == 0 || end == kMin) return {0, 0, 0};
  if (!s.queued_loop && !s.gpu_tail_loop) return {begin, end, last};
  const int64_t host = h1 > h0 ? h1 - h0 : 0;
  if (s.queued_loop) return {end - std::max(host, end - anchor), end, last};
  // A lane's ops may lie with several processes (any partition of the nodes is a shard's): merge its parts.
  std::sort(lanes.begin(), lanes.end());
  size_t kept = 0;
  for (size_t i = 0; i < lanes.size(); ++i) {
    if (kept > 0 && lanes[kept - 1][0] == lanes[i][0]) {
      auto& l = lanes[kept - 1];
      l[1] = std::min(l[1], lanes[i][1]);
      if (lanes[i][2] > l[2] || (lanes[i][2] == l[2] && lanes[i][3] < l[3])) l[2] = lanes[i][2], l[3] = lanes[i][3];
    } else {
      lanes[kept++] = lanes[i];
    }
  }
  lanes.resize(kept);
  int64_t wb = h0 == kMax ? end : h0, we = h1 == kMin ? end : h1;
  int64_t wl = h1 == kMin ? last : int64_t(graph::end_point(NodeId(h_node)));
  for (const auto& l : lanes) {
    if (l[2] - l[1] > we - wb) wb = l[1], we = l[2], wl = int64_t(graph::end_point(NodeId(l[3])));
  }
  return {wb, we, wl};
}

}  // namespace

std::vector<int32_t> owners(const graph::Graph& g, int processes) {
  const size_t ranks = g.num_ranks();
  std::vector<int32_t> of_rank(ranks, 0);
  for (int p = 0; p < processes; ++p) {
    const auto [b, e] = dist::shard(ranks, p, processes);
    for (size_t r = b; r < e; ++r) of_rank[r] = p;
  }
  std::vector<int32_t> owner(g.num_nodes(), 0);
  for (NodeId n = 0; n < g.num_nodes(); ++n) owner[n] = g.rank[n] < ranks ? of_rank[g.rank[n]] : 0;
  return owner;
}

namespace {
// The processes that read local point `p` (`procs`, any order, repeats allowed), appended to the side's.
void add_readers(ShardSide& side, std::vector<int32_t>& procs, uint32_t p) {
  std::sort(procs.begin(), procs.end());
  procs.erase(std::unique(procs.begin(), procs.end()), procs.end());
  side.to.insert(side.to.end(), procs.begin(), procs.end());
  side.to_off[p + 1] = uint32_t(side.to.size());
}

// The reverse of a side's dep: who reads each local point and each import.
void index_readers(ShardSide& side, size_t np) {
  side.next_off.assign(np + side.imports.size() + 1, 0);
  for (uint32_t d : side.dep) ++side.next_off[d + 1];
  std::partial_sum(side.next_off.begin(), side.next_off.end(), side.next_off.begin());
  side.next.resize(side.dep.size());
  std::vector<uint32_t> fill(side.next_off.begin(), side.next_off.end() - 1);
  for (uint32_t p = 0; p < np; ++p) {
    for (uint32_t k = side.dep_off[p]; k < side.dep_off[p + 1]; ++k) side.next[fill[side.dep[k]]++] = p;
  }
}

// One direction's dependencies of the shard's points: `deps(p)` and `reads(p)` the edges of global point p
// that it depends on and that depend on it, `other(e)` and `reader(e)` the point at the other end of each.
template <class Deps, class Reads, class Other, class Reader>
ShardSide make_side(const graph::Graph& g, const std::vector<int32_t>& owner, const Shard& s,
                    const std::vector<uint32_t>& local_of, Deps&& deps, Reads&& reads, Other&& other,
                    Reader&& reader) {
  ShardSide side;
  const size_t np = s.num_points();
  for (uint32_t p = 0; p < np; ++p) {
    deps(s.global_point(p), [&](uint32_t e) {
      const PointId q = other(g.edges[e]);
      if (owner[graph::node_of(q)] != s.process) side.imports.push_back(q);
    });
  }
  std::sort(side.imports.begin(), side.imports.end());
  side.imports.erase(std::unique(side.imports.begin(), side.imports.end()), side.imports.end());
  for (PointId q : side.imports) side.import_from.push_back(owner[graph::node_of(q)]);
  side.dep_off.assign(np + 1, 0);
  side.reads_import.assign(np, 0);
  side.to_off.assign(np + 1, 0);
  std::vector<int32_t> procs;
  for (uint32_t p = 0; p < np; ++p) {
    deps(s.global_point(p), [&](uint32_t e) {
      const PointId q = other(g.edges[e]);
      const NodeId n = graph::node_of(q);
      if (owner[n] == s.process) {
        side.dep.push_back(2 * local_of[n] + (q & 1u));
      } else {
        const auto it = std::lower_bound(side.imports.begin(), side.imports.end(), q);
        side.dep.push_back(uint32_t(np + size_t(it - side.imports.begin())));
        side.reads_import[p] = 1;
      }
      side.dep_lat.push_back(g.edges[e].lat_ns);
      side.dep_kind.push_back(g.edges[e].kind);
    });
    side.dep_off[p + 1] = uint32_t(side.dep.size());
    procs.clear();
    reads(s.global_point(p), [&](uint32_t e) {
      const int32_t o = owner[graph::node_of(reader(g.edges[e]))];
      if (o != s.process) procs.push_back(o);
    });
    add_readers(side, procs, p);
  }
  index_readers(side, np);
  return side;
}
}  // namespace

Shard make_shard(const graph::Graph& g, const std::vector<int32_t>& owner, int process, int processes) {
  Shard s;
  s.id = next_shard_id();
  s.process = process;
  s.processes = processes;
  s.graph_points = g.num_points();
  s.lanes = g.lanes.size();
  s.queued_loop = !g.queued_ops.empty();
  s.gpu_tail_loop = g.gpu_tail_loop;
  std::vector<uint32_t> local_of(g.num_nodes(), graph::kNoId);
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (owner[n] != process) continue;
    local_of[n] = uint32_t(s.nodes.size());
    s.nodes.push_back(n);
    s.dur_ns.push_back(g.dur_ns[n]);
    s.meas_start_ns.push_back(g.meas_start_ns[n]);
    s.counts.push_back(g.counts_for_span(n) ? 1 : 0);
    s.cls.push_back(g.kind[n] == NodeKind::kCollective ? 2 : graph::is_gpu(g.kind[n]) ? 1 : 0);
    s.lane.push_back(g.lane[n]);
    s.kind.push_back(g.kind[n]);
    s.queued.push_back(0);
  }
  std::copy(std::begin(g.inherent_lat_ns), std::end(g.inherent_lat_ns), std::begin(s.inherent_lat_ns));
  for (NodeId n : g.queued_ops) {
    if (n < g.num_nodes() && owner[n] == process) s.queued[local_of[n]] = 1;
  }
  const auto in = [&](PointId p, auto&& f) {
    for (uint32_t k = g.in_offsets[p]; k < g.in_offsets[p + 1]; ++k) f(g.in_edges[k]);
  };
  const auto out = [&](PointId p, auto&& f) {
    for (uint32_t k = g.out_offsets[p]; k < g.out_offsets[p + 1]; ++k) f(g.out_edges[k]);
  };
  const auto src = [](const graph::Edge& e) { return e.src; };
  const auto dst = [](const graph::Edge& e) { return e.dst; };
  s.forward = make_side(g, owner, s, local_of, in, out, src, dst);
  s.backward = make_side(g, owner, s, local_of, out, in, dst, src);
  return s;
}

namespace {
// One direction's dependencies of a part's points: its own edges (forward: into each point; backward: out
// of it), and its edges with other processes' points.
ShardSide part_side(const graph::GraphPart& part, bool forward) {
  const graph::Graph& g = part.graph;
  const size_t np = g.num_points();
  ShardSide side;
  for (const graph::RemoteEdge& r : part.remote) {
    if (r.into_local == forward) side.imports.push_back(r.other);
  }
  std::sort(side.imports.begin(), side.imports.end());
  side.imports.erase(std::unique(side.imports.begin(), side.imports.end()), side.imports.end());
  side.import_from.assign(side.imports.size(), 0);
  // Per local point, its edges with other processes' points in this direction: (import, lat), and who reads it.
  std::vector<uint32_t> r_off(np + 1, 0), w_off(np + 1, 0);
  for (const graph::RemoteEdge& r : part.remote) ++(r.into_local == forward ? r_off : w_off)[r.local + 1];
  std::partial_sum(r_off.begin(), r_off.end(), r_off.begin());
  std::partial_sum(w_off.begin(), w_off.end(), w_off.begin());
  struct Read {
    uint32_t dep;
    int64_t lat;
    graph::EdgeKind kind;
  };
  std::vector<Read> reads(r_off[np]);
  std::vector<int32_t> readers(w_off[np]);
  {
    std::vector<uint32_t> rf(r_off.begin(), r_off.end() - 1), wf(w_off.begin(), w_off.end() - 1);
    for (const graph::RemoteEdge& r : part.remote) {
      if (r.into_local == forward) {
        const auto j = uint32_t(std::lower_bound(side.imports.begin(), side.imports.end(), r.other) -
                                side.imports.begin());
        side.import_from[j] = r.process;
        reads[rf[r.local]++] = {uint32_t(np) + j, r.lat_ns, r.kind};
      } else {
        readers[wf[r.local]++] = r.process;
      }
    }
  }
  side.dep_off.assign(np + 1, 0);
  side.reads_import.assign(np, 0);
  side.to_off.assign(np + 1, 0);
  const auto& offsets = forward ? g.in_offsets : g.out_offsets;
  const auto& ids = forward ? g.in_edges : g.out_edges;
  for (uint32_t p = 0; p < np; ++p) {
    for (uint32_t k = offsets[p]; k < offsets[p + 1]; ++k) {
      const graph::Edge& e = g.edges[ids[k]];
      side.dep.push_back(forward ? e.src : e.dst);
      side.dep_lat.push_back(e.lat_ns);
      side.dep_kind.push_back(e.kind);
    }
    for (uint32_t k = r_off[p]; k < r_off[p + 1]; ++k) {
      side.dep.push_back(reads[k].dep);
      side.dep_lat.push_back(reads[k].lat);
      side.dep_kind.push_back(reads[k].kind);
      side.reads_import[p] = 1;
    }
    side.dep_off[p + 1] = uint32_t(side.dep.size());
    std::vector<int32_t> procs(readers.begin() + w_off[p], readers.begin() + w_off[p + 1]);
    add_readers(side, procs, p);
  }
  index_readers(side, np);
  return side;
}
}  // namespace

Shard make_shard(const graph::GraphPart& part) {
  const graph::Graph& g = part.graph;
  Shard s;
  s.id = next_shard_id();
  s.process = part.process;
  s.processes = part.processes;
  s.graph_points = 2 * part.total_nodes;
  s.lanes = part.total_lanes;
  s.queued_loop = part.queued_loop;
  s.gpu_tail_loop = g.gpu_tail_loop;
  s.nodes = part.global;
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    s.dur_ns.push_back(g.dur_ns[n]);
    s.meas_start_ns.push_back(g.meas_start_ns[n]);
    s.counts.push_back(g.counts_for_span(n) ? 1 : 0);
    s.cls.push_back(g.kind[n] == NodeKind::kCollective ? 2 : graph::is_gpu(g.kind[n]) ? 1 : 0);
    s.lane.push_back(g.lane[n] == graph::kNoId ? graph::kNoId : uint32_t(part.lane_base + g.lane[n]));
    s.kind.push_back(g.kind[n]);
  }
  std::copy(std::begin(g.inherent_lat_ns), std::end(g.inherent_lat_ns), std::begin(s.inherent_lat_ns));
  s.queued.assign(g.num_nodes(), 0);
  for (NodeId n : g.queued_ops) {
    if (n < g.num_nodes()) s.queued[n] = 1;
  }
  s.forward = part_side(part, true);
  s.backward = part_side(part, false);
  return s;
}

namespace {
// The forward sweep of `durs.size()` plans side by side (each one's durations per local node; an empty one:
// the graph's) into `val` (point-major, imports after the points), in `order` where it is this shard's
// (`order_of`), else in dataflow order, kept in `order`.
Status forward_sweep(const Shard& s, const std::vector<const std::vector<int64_t>*>& durs, dist::Comm& comm,
                     std::vector<uint32_t>& order, uint64_t& order_of, std::vector<int64_t>& val, int64_t& sent,
                     int64_t& waits) {
  if (comm.size() != s.processes || comm.rank() != s.process) {
    return make_error("", fmt::format("a replay shard of process {} of {} run on process {} of {}", s.process,
                                      s.processes, comm.rank(), comm.size()));
  }
  for (const std::vector<int64_t>* d : durs) {
    if (!d->empty() && d->size() != s.num_nodes()) {
      return make_error("", fmt::format("{} durations for a shard of {} nodes", d->size(), s.num_nodes()));
    }
  }
  const size_t w = durs.size();
  // The plans' durations node-major, as the values are (one plan: its own vector).
  static thread_local std::vector<int64_t> dd;
  if (w > 1) {
    dd.resize(s.num_nodes() * w);
    for (size_t i = 0; i < w; ++i) {
      for (uint32_t n = 0; n < s.num_nodes(); ++n) dd[size_t(n) * w + i] = dur_of(s, *durs[i], n);
    }
  }
  Sweep sweep(s, s.forward, comm, kTagForward, val, w);
  const ShardSide& f = s.forward;
  const auto value = [&](uint32_t p, int64_t* out) {
    const uint32_t deps = f.dep_off[p], deps_end = f.dep_off[p + 1];
    if (p & 1u) {
      const int64_t* start = &val[size_t(p - 1) * w];
      if (w == 1) {
        out[0] = start[0] + dur_of(s, *durs[0], p / 2);
      } else {
        const int64_t* d = &dd[size_t(p / 2) * w];
        for (size_t i = 0; i < w; ++i) out[i] = start[i] + d[i];
      }
    } else {
      // A start with no predecessor keeps its measured time (the step's anchor), as in Replayer::run().
      std::fill_n(out, w, deps == deps_end ? s.meas_start_ns[p / 2] : kMin);
    }
    for (uint32_t k = deps; k < deps_end; ++k) {
      const int64_t* from = &val[size_t(f.dep[k]) * w];
      const int64_t lat = f.dep_lat[k];
      for (size_t i = 0; i < w; ++i) out[i] = std::max(out[i], from[i] + lat);
    }
  };
  if (order.size() == s.num_points() && order_of == s.id && s.id != 0) {
    EMO_RETURN_IF_ERROR(sweep.run_ordered(order, false, value));
  } else {
    EMO_RETURN_IF_ERROR(sweep.run_dataflow(true, order, value));
    order_of = s.id;
  }
  sent = sweep.sent;
  waits = sweep.waits;
  return {};
}

// Several timelines' spans in one exchange: per process, each timeline's span_part after its length.
Result<std::vector<std::array<int64_t, 3>>> spans_distributed(const Shard& s, const std::vector<ShardTimeline>& tls,
                                                              dist::Comm& comm) {
  std::vector<int64_t> mine;
  for (const ShardTimeline& tl : tls) {
    const std::vector<int64_t> part = span_part(s, tl.t_ns);
    mine.push_back(int64_t(part.size()));
    mine.insert(mine.end(), part.begin(), part.end());
  }
  const size_t n = tls.size();
  auto spans = all_combine(comm, mine, [&](const std::vector<std::vector<int64_t>>& parts) {
    std::vector<size_t> at(parts.size(), 0);
    std::vector<int64_t> out;
    for (size_t i = 0; i < n; ++i) {
      std::vector<std::vector<int64_t>> of(parts.size());
      for (size_t q = 0; q < parts.size(); ++q) {
        const std::vector<int64_t>& v = parts[q];
        if (at[q] >= v.size() || v[at[q]] < 0 || at[q] + 1 + size_t(v[at[q]]) > v.size()) return std::vector<int64_t>{};
        of[q].assign(v.begin() + ptrdiff_t(at[q] + 1), v.begin() + ptrdiff_t(at[q] + 1 + size_t(v[at[q]])));
        at[q] += 1 + size_t(v[at[q]]);
      }
      const std::vector<int64_t> span = combine_span(s, of);
      if (span.size() != 3) return std::vector<int64_t>{};
      out.insert(out.end(), span.begin(), span.end());
    }
    return out;
  });
  if (!spans) return spans.error();
  if (spans->size() != 3 * n) return make_error("", "the replay's spans arrived cut short");
  std::vector<std::array<int64_t, 3>> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = {(*spans)[3 * i], (*spans)[3 * i + 1], (*spans)[3 * i + 2]};
  return out;
}
}  // namespace

Status run_distributed(const Shard& s, const std::vector<int64_t>& dur_ns, dist::Comm& comm, ShardTimeline& out) {
  std::vector<int64_t> val;
  val.swap(out.t_ns);  // its memory again, where the same timeline is replayed again
  EMO_RETURN_IF_ERROR(forward_sweep(s, {&dur_ns}, comm, out.order, out.order_of, val, out.messages_sent, out.waits));
  out.import_t_ns.assign(val.begin() + std::ptrdiff_t(s.num_points()), val.end());
  val.resize(s.num_points());
  out.t_ns = std::move(val);
  auto span = span_distributed(s, out.t_ns, comm);
  if (!span) return span.error();
  out.begin_ns = (*span)[0];
  out.end_ns = (*span)[1];
  out.last_point = PointId((*span)[2]);
  return {};
}

Status run_distributed_batch(const Shard& s, const std::vector<std::vector<int64_t>>& durs, dist::Comm& comm,
                             std::vector<uint32_t>& order, uint64_t& order_of, std::vector<ShardTimeline>& out) {
  out.assign(durs.size(), {});
  if (durs.empty()) return {};
  std::vector<const std::vector<int64_t>*> ds;
  for (const std::vector<int64_t>& d : durs) ds.push_back(&d);
  static thread_local std::vector<int64_t> val;  // kept: a process replays many batches
  int64_t sent = 0, waits = 0;
  EMO_RETURN_IF_ERROR(forward_sweep(s, ds, comm, order, order_of, val, sent, waits));
  const size_t w = durs.size(), np = s.num_points(), ni = s.forward.imports.size();
  for (size_t i = 0; i < w; ++i) {
    ShardTimeline& tl = out[i];
    tl.t_ns.resize(np);
    for (size_t p = 0; p < np; ++p) tl.t_ns[p] = val[p * w + i];
    tl.import_t_ns.resize(ni);
    for (size_t j = 0; j < ni; ++j) tl.import_t_ns[j] = val[(np + j) * w + i];
  }
  out.front().messages_sent = sent;
  out.front().waits = waits;
  auto spans = spans_distributed(s, out, comm);
  if (!spans) return spans.error();
  for (size_t i = 0; i < w; ++i) {
    out[i].begin_ns = (*spans)[i][0];
    out[i].end_ns = (*spans)[i][1];
    out[i].last_point = PointId((*spans)[i][2]);
  }
  return {};
}

Result<std::array<int64_t, 3>> span_distributed(const Shard& s, const std::vector<int64_t>& t_ns, dist::Comm& comm) {
  if (t_ns.size() != s.num_points()) {
    return make_error("", fmt::format("{} times for a shard of {} points", t_ns.size(), s.num_points()));
  }
  auto span = all_combine(comm, span_part(s, t_ns),
                          [&](const std::vector<std::vector<int64_t>>& parts) { return combine_span(s, parts); });
  if (!span) return span.error();
  if (span->size() != 3) return make_error("", "the replay's span arrived cut short");
  return std::array<int64_t, 3>{(*span)[0], (*span)[1], (*span)[2]};
}

Status slack_distributed(const Shard& s, const std::vector<int64_t>& dur_ns, const ShardTimeline& tl,
                         dist::Comm& comm, std::vector<int64_t>& slack_ns) {
  if (comm.size() != s.processes || comm.rank() != s.process || tl.t_ns.size() != s.num_points()) {
    return make_error("", "the slack of a replay shard asked with another shard's timeline or processes");
  }
  if (!dur_ns.empty() && dur_ns.size() != s.num_nodes()) {
    return make_error("", fmt::format("{} durations for a shard of {} nodes", dur_ns.size(), s.num_nodes()));
  }
  constexpr int64_t kUnbounded = kMax / 4;
  // A loop whose GPU tail runs free: each lane's ops may end by the lane's first start plus the period, the
  // host's by the host's first start plus it, a collective by the latest of these (Replayer::slack()).
  const bool tail = s.gpu_tail_loop && !s.queued_loop;
  std::vector<int64_t> bound;
  int64_t host_bound = tl.end_ns, latest = tl.end_ns;
  if (tail) {
    const int64_t period = tl.makespan_ns();
    // Each lane's first start, then the host's, over every process (a lane's ops may lie with several).
    std::vector<int64_t> first(s.lanes + 1, kMax);
    for (uint32_t i = 0; i < s.num_nodes(); ++i) {
      if (!s.counts[i] || s.cls[i] == 2) continue;
      const size_t k = s.cls[i] == 1 && s.lane[i] < s.lanes ? s.lane[i] : s.lanes;
      first[k] = std::min(first[k], tl.t_ns[2 * i]);
    }
    auto r = all_combine(comm, first, [&](const std::vector<std::vector<int64_t>>& parts) {
      std::vector<int64_t> all(s.lanes + 1, kMax);
      for (const auto& v : parts) {
        for (size_t k = 0; k < std::min(v.size(), all.size()); ++k) all[k] = std::min(all[k], v[k]);
      }
      return all;
    });
    if (!r) return r.error();
    if (r->size() != s.lanes + 1) return make_error("", "the replay's bounds arrived cut short");
    bound.assign(s.lanes + 1, tl.end_ns);
    for (size_t k = 0; k <= s.lanes; ++k) {
      if ((*r)[k] == kMax) continue;
      bound[k] = (*r)[k] + period;
      latest = std::max(latest, bound[k]);
    }
    host_bound = bound[s.lanes];
  }
  const auto bound_of = [&](uint32_t i) {
    if (!tail) return tl.end_ns;
    if (s.cls[i] == 1 && s.lane[i] < s.lanes) return bound[s.lane[i]];
    return s.cls[i] == 2 ? latest : host_bound;
  };
  static thread_local std::vector<int64_t> late;  // kept: a process replays many times
  Sweep sweep(s, s.backward, comm, kTagBackward, late);
  const ShardSide& b = s.backward;
  const auto value = [&](uint32_t p, int64_t* out) {
    int64_t v = s.counts[p / 2] ? bound_of(p / 2) : kUnbounded;
    for (uint32_t k = b.dep_off[p]; k < b.dep_off[p + 1]; ++k) v = std::min(v, late[b.dep[k]] - b.dep_lat[k]);
    if (!(p & 1u)) v = std::min(v, late[p + 1] - dur_of(s, dur_ns, p / 2));
    *out = v;
  };
  // The forward run's order in reverse (its run was on this shard: checked above), else dataflow.
  if (tl.order.size() == s.num_points() && tl.order_of == s.id && s.id != 0) {
    EMO_RETURN_IF_ERROR(sweep.run_ordered(tl.order, true, value));
  } else {
    static thread_local std::vector<uint32_t> order;
    EMO_RETURN_IF_ERROR(sweep.run_dataflow(false, order, value));
  }
  // A dataflow sweep takes any process's next batch, and processes choose their way alone (a process with
  // no point has its order): no process starts its next slack before every process has ended this one.
  auto done = all_combine(comm, {}, [](const std::vector<std::vector<int64_t>>&) { return std::vector<int64_t>{}; });
  if (!done) return done.error();
  slack_ns.resize(s.num_nodes());
  for (uint32_t i = 0; i < s.num_nodes(); ++i) slack_ns[i] = std::max<int64_t>(0, late[2 * i + 1] - tl.t_ns[2 * i + 1]);
  return {};
}

namespace {
// A process's pieces of the critical path: each node and segment it found with its place in the walk.
struct PathPieces {
  detail::PathWalk walk;
  std::vector<int64_t> node_seq, segment_seq;
  bool began_here = false;  // the walk ended (the path began) at one of this process's points

  // Nodes and segments [from] of the walk so far found in a run that took over at places `node0`, `seg0`.
  void number(size_t nodes_from, size_t segs_from, int64_t node0, int64_t seg0) {
    for (size_t i = nodes_from; i < walk.cp.nodes.size(); ++i) node_seq.push_back(node0 + int64_t(i - nodes_from));
    for (size_t i = segs_from; i < walk.cp.segments.size(); ++i) segment_seq.push_back(seg0 + int64_t(i - segs_from));
  }
  std::string bytes() const {
    std::vector<int64_t> v(std::begin(walk.breakdown), std::end(walk.breakdown));
    v.push_back(int64_t(walk.cp.nodes.size()));
    for (size_t i = 0; i < walk.cp.nodes.size(); ++i) {
      v.push_back(node_seq[i]);
      v.push_back(int64_t(walk.cp.nodes[i]));
    }
    for (size_t i = 0; i < walk.cp.segments.size(); ++i) {
      const CriticalPath::Segment& g = walk.cp.segments[i];
      v.insert(v.end(), {segment_seq[i], int64_t(g.node), int64_t(g.from), g.is_edge ? 1 : 0, int64_t(g.edge),
                         g.start_ns, g.ns});
    }
    return dist::to_bytes(v);
  }
};
constexpr size_t kSegmentFields = 7;
}  // namespace

Result<CriticalPath> critical_path_distributed(const Shard& s, const std::vector<int64_t>& dur_ns,
                                               const ShardTimeline& tl, dist::Comm& comm) {
  const ShardSide& f = s.forward;
  const size_t np = s.num_points();
  if (comm.size() != s.processes || comm.rank() != s.process || tl.t_ns.size() != np ||
      tl.import_t_ns.size() != f.imports.size()) {
    return make_error("", "the critical path of a replay shard asked with another shard's timeline or processes");
  }
  if (!dur_ns.empty() && dur_ns.size() != s.num_nodes()) {
    return make_error("", fmt::format("{} durations for a shard of {} nodes", dur_ns.size(), s.num_nodes()));
  }
  const auto time_of = [&](uint32_t d) { return d < np ? tl.t_ns[d] : tl.import_t_ns[d - np]; };
  const auto global_of = [&](uint32_t d) { return d < np ? s.global_point(d) : f.imports[d - np]; };
  // This process's point of global point q, or -1.
  const auto local_of = [&](PointId q) -> int64_t {
    const auto it = std::lower_bound(s.nodes.begin(), s.nodes.end(), graph::node_of(q));
    if (it == s.nodes.end() || *it != graph::node_of(q)) return -1;
    return 2 * int64_t(it - s.nodes.begin()) + int64_t(q & 1u);
  };
  PathPieces mine;
  std::string failure;
  // Walks back from local point p as Replayer::critical_path() does until the path begins here or crosses
  // to another process's point (handed over: its global id, the walk's last node and places so far).
  const auto walk_from = [&](uint32_t p, NodeId last_node, int64_t node0, int64_t seg0) -> Status {
    detail::PathWalk& w = mine.walk;
    w.last_node = last_node;
    const size_t nodes_from = w.cp.nodes.size(), segs_from = w.cp.segments.size();
    std::vector<int64_t> handover;
    while (true) {
      const uint32_t i = p / 2;
      const NodeId n = s.nodes[i];
      const int64_t t = tl.t_ns[p];
      if ((p & 1u) && tl.t_ns[p - 1] + dur_of(s, dur_ns, i) == t) {
        w.node(n, s.kind[i], tl.t_ns[p - 1], t - tl.t_ns[p - 1]);
        --p;
        continue;
      }
      int64_t best = -1;
      for (uint32_t k = f.dep_off[p]; k < f.dep_off[p + 1]; ++k) {
        if (time_of(f.dep[k]) + f.dep_lat[k] != t) continue;
        if (best < 0 || detail::binds_before(global_of(f.dep[k]), f.dep_kind[k], global_of(f.dep[size_t(best)]),
                                             f.dep_kind[size_t(best)])) {
          best = k;
        }
      }
      if (best < 0) {  // an anchored start: the path begins here
        w.anchor(t - tl.begin_ns);
        mine.began_here = true;
        break;
      }
      const uint32_t d = f.dep[size_t(best)];
      const graph::EdgeKind kind = f.dep_kind[size_t(best)];
      w.edge(global_of(p), n, graph::node_of(global_of(d)), kind, time_of(d), t - time_of(d),
             s.inherent_lat_ns[static_cast<int>(kind)]);
      if (d < np) {
        p = d;
        continue;
      }
      handover = {int64_t(f.imports[d - np]), int64_t(w.last_node),
                  node0 + int64_t(w.cp.nodes.size() - nodes_from), seg0 + int64_t(w.cp.segments.size() - segs_from)};
      mine.number(nodes_from, segs_from, node0, seg0);
      return comm.send(f.import_from[d - np], kTagPath, dist::to_bytes(handover));
    }
    mine.number(nodes_from, segs_from, node0, seg0);
    return {};
  };
  // The walk is over (the path began here, or the walk failed here): every other process stops waiting.
  const auto end_walk = [&]() -> Status {
    for (int q = 0; q < comm.size(); ++q) {
      if (q != comm.rank()) EMO_RETURN_IF_ERROR(comm.send(q, kTagPath, dist::to_bytes({-1})));
    }
    return {};
  };
  Status st;
  if (s.graph_points > 0) {
    const int64_t first = s.graph_points == 0 ? -1 : local_of(tl.last_point);
    if (first >= 0) st = walk_from(uint32_t(first), graph::kNoId, 0, 0);
    // Until the path is whole (or its walk fails here), the walk comes back whenever it reaches this
    // process's points.
    while (st.ok() && !mine.began_here) {
      auto m = comm.recv_any(kTagPath, dist::timeout_s());
      if (!m) {
        st = make_error("", "the critical path's walk: " + m.error().message());
        break;
      }
      auto v = dist::from_bytes(m->second, m->first);
      if (!v) {
        st = v.error();
        break;
      }
      if (v->size() == 1 && (*v)[0] == -1) break;
      const int64_t at = v->size() == 4 ? local_of(PointId((*v)[0])) : -1;
      if (at < 0) {
        st = make_error("", fmt::format("process {} handed the critical path's walk to a point process {} does "
                                        "not hold", m->first, comm.rank()));
        break;
      }
      st = walk_from(uint32_t(at), NodeId((*v)[1]), (*v)[2], (*v)[3]);
    }
    if (mine.began_here || !st.ok()) {
      if (Status ended = end_walk(); st.ok()) st = ended;
    }
  }
  if (!st.ok()) failure = st.error().message();
  auto all = dist::all_gather(comm, kTagPathPieces, dist::frame({failure, mine.bytes()}));
  if (!all) return make_error("", "the critical path's pieces: " + all.error().message());
  // Every process's pieces, in the walk's places; the walk went backward, the path goes forward.
  std::vector<std::pair<int64_t, NodeId>> nodes;
  std::vector<std::pair<int64_t, CriticalPath::Segment>> segments;
  int64_t breakdown[detail::kCategoryCount] = {0, 0, 0, 0, 0, 0, 0};
  for (size_t q = 0; q < all->size(); ++q) {
    auto fields = dist::unframe((*all)[q]);
    if (!fields || fields->size() != 2) return make_error("", fmt::format("process {} sent a cut piece of the critical path", q));
    if (!(*fields)[0].empty()) return make_error("", fmt::format("process {}: {}", q, (*fields)[0]));
    auto v = dist::from_bytes((*fields)[1], int(q));
    if (!v) return v.error();
    const std::vector<int64_t>& x = *v;
    size_t k = detail::kCategoryCount;
    if (x.size() < k + 1) return make_error("", fmt::format("process {} sent a cut piece of the critical path", q));
    for (int c = 0; c < detail::kCategoryCount; ++c) breakdown[c] += x[size_t(c)];
    const auto n_nodes = size_t(x[k++]);
    if (n_nodes > (x.size() - k) / 2 || (x.size() - k - 2 * n_nodes) % kSegmentFields != 0) {
      return make_error("", fmt::format("process {} sent a cut piece of the critical path", q));
    }
    for (size_t i = 0; i < n_nodes; ++i, k += 2) nodes.emplace_back(x[k], NodeId(x[k + 1]));
    for (; k < x.size(); k += kSegmentFields) {
      segments.push_back({x[k], {NodeId(x[k + 1]), NodeId(x[k + 2]), x[k + 3] != 0, graph::EdgeKind(x[k + 4]),
                                 x[k + 5], x[k + 6]}});
    }
  }
  const auto later_first = [](const auto& a, const auto& b) { return a.first > b.first; };
  std::sort(nodes.begin(), nodes.end(), later_first);
  std::sort(segments.begin(), segments.end(), later_first);
  CriticalPath cp;
  for (const auto& [seq, n] : nodes) cp.nodes.push_back(n);
  for (const auto& [seq, g] : segments) cp.segments.push_back(g);
  cp.breakdown = detail::breakdown_parts(breakdown);
  cp.length_ns = tl.makespan_ns();
  return cp;
}

}  // namespace emo::replay
