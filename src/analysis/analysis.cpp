// Load → graph → replay → summaries for `emo analyze`, with its JSON and text views.
#include "emo/analysis/analysis.h"
#include "emo/analysis/deprofile.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <tuple>

#include "emo/base/parallel.h"
#include "emo/base/stats.h"
#include "emo/dist/dist.h"
#include "emo/replay/distributed.h"
#include "emo/trace/runtime_calls.h"

namespace emo::analysis {

using graph::NodeId;
using graph::NodeKind;

namespace {

// One rank file read, and restricted to the step where `selected`.
struct Read {
  trace::RankTrace trace;  // only path, rank and world_size where select_error is set
  bool selected = false;
  int64_t step = -1;
  std::optional<Error> select_error;
};

Result<int64_t> select(trace::RankTrace& t, const LoadOptions& options) {
  auto s = trace::select_step(t, options.step);
  if (!s.ok()) return s.error();
  if (options.cpu_ops_as_kernels) {
    auto k = trace::cpu_ops_as_kernels(t);
    if (!k.ok()) return k.error();
  }
  return s.value();
}

// Reads one file and restricts it to the step at once (its events outside the step are not kept).
Result<Read> read_one(const std::string& path, const LoadOptions& options) {
  auto t = trace::read_trace(path);
  if (!t.ok()) return t.error();
  Read r;
  r.trace = std::move(t).value();
  r.selected = true;
  auto s = select(r.trace, options);
  if (s.ok()) {
    r.step = s.value();
  } else {
    r.select_error = s.error();
    trace::RankTrace header;
    header.path = std::move(r.trace.path);
    header.rank = r.trace.rank;
    header.world_size = r.trace.world_size;
    r.trace = std::move(header);
  }
  return r;
}

// The checks across ranks, the order by rank, the step of each (where not selected yet) and the graph.
Result<Workload> finish(std::vector<Read> reads, const LoadOptions& options) {
  if (reads.empty()) return make_error("", "no trace given");
  // One run: the files that name a world size (distributedInfo.world_size) all name the same one.
  const trace::RankTrace* sized = nullptr;
  for (const auto& r : reads) {
    const trace::RankTrace& t = r.trace;
    if (t.world_size < 1) continue;
    if (sized && t.world_size != sized->world_size)
      return make_error(t.path,
                        fmt::format("world_size {} is not the world_size {} of {}", t.world_size, sized->world_size,
                                    sized->path),
                        "give one trace file per rank of the same run");
    if (!sized) sized = &t;
  }
  if (sized && reads.size() > 1) {
    for (const auto& r : reads) {
      if (r.trace.world_size < 1)
        return make_error(r.trace.path,
                          fmt::format("has no distributedInfo.world_size, while {} has world_size {}: not one run",
                                      sized->path, sized->world_size),
                          "give one trace file per rank of the same run");
    }
  }
  // Order by rank: distributedInfo.rank where every file has one, else file order.
  bool all_ranked = std::all_of(reads.begin(), reads.end(), [](const Read& r) { return r.trace.rank >= 0; });
  if (all_ranked && reads.size() > 1) {
    std::stable_sort(reads.begin(), reads.end(), [](const Read& a, const Read& b) { return a.trace.rank < b.trace.rank; });
    for (size_t i = 1; i < reads.size(); ++i) {
      if (reads[i].trace.rank == reads[i - 1].trace.rank) {
        return make_error(reads[i].trace.path,
                          fmt::format("rank {} is also the rank of {}", reads[i].trace.rank, reads[i - 1].trace.path),
                          "give one trace file per rank of the same run (a folder that a profiler wrote several "
                          "cycles into holds several files per rank: give one cycle's files)");
      }
    }
  }
  if (!all_ranked) {
    for (size_t i = 0; i < reads.size(); ++i) reads[i].trace.rank = static_cast<int>(i);
  }
  Workload w;
  w.ranks.reserve(reads.size());
  for (Read& r : reads) {
    if (!r.selected) {
      auto s = select(r.trace, options);
      if (!s.ok()) return s.error();
      r.step = s.value();
    }
    if (r.select_error) return *r.select_error;
    w.steps.push_back(r.step);
    w.events += static_cast<int64_t>(r.trace.events.size());
    w.ranks.push_back(std::move(r.trace));
  }
  auto g = graph::build_graph(w.ranks, options.build);
  if (!g.ok()) return g.error();
  w.graph = std::move(g).value();
  w.graph.step_of_rank = w.steps;
  if (options.deprofile) return without_profiler_cost(std::move(w), options);
  return w;
}

// ---- the shards of an MPI run: one message per rank file, from the process that read it to process 0 ----
constexpr int kTagShard = 11;
// 'T': the trace (its step, its tables); 'R': it could not be read (the error); 'S': its step could not be
// selected (path, rank, world_size, the error); 'K': not read, an earlier file of the shard could not be.
std::string encode_error(char kind, const Error& e, const trace::RankTrace* header = nullptr) {
  std::vector<std::string> f{std::string(1, kind), e.where, e.what, e.note};
  if (header) {
    f.push_back(header->path);
    f.push_back(std::to_string(header->rank));
    f.push_back(std::to_string(header->world_size));
  }
  return dist::frame({f.begin(), f.end()});
}

std::string encode(const Result<Read>& r) {
  if (!r.ok()) return encode_error('R', r.error());
  if (r->select_error) return encode_error('S', *r->select_error, &r->trace);
  const std::string step = std::to_string(r->step);
  const std::string wire = trace::to_wire(r->trace);
  return dist::frame({"T", step, wire});
}

// std::nullopt: a 'K' (skipped) message.
Result<std::optional<Result<Read>>> decode(std::string_view bytes, const std::string& path, int from) {
  const auto bad = [&] {
    return make_error(path, fmt::format("the message of process {} about this file is corrupt", from),
                      "run the same emo binary on every process");
  };
  auto f = dist::unframe(bytes);
  if (!f.ok() || f->empty() || (*f)[0].size() != 1) return bad();
  const std::vector<std::string_view>& v = *f;
  const char kind = v[0][0];
  if (kind == 'K' && v.size() == 1) return std::optional<Result<Read>>{};
  const auto to_error = [&] { return make_error(std::string(v[1]), std::string(v[2]), std::string(v[3])); };
  if (kind == 'R' && v.size() == 4) return std::optional<Result<Read>>{Result<Read>(to_error())};
  if (kind == 'S' && v.size() == 7) {
    Read r;
    r.selected = true;
    r.select_error = to_error();
    r.trace.path = std::string(v[4]);
    r.trace.rank = std::atoi(std::string(v[5]).c_str());
    r.trace.world_size = std::atoi(std::string(v[6]).c_str());
    return std::optional<Result<Read>>{Result<Read>(std::move(r))};
  }
  if (kind == 'T' && v.size() == 3) {
    auto t = trace::from_wire(v[2]);
    if (!t.ok()) return t.error();
    Read r;
    r.trace = std::move(t).value();
    r.selected = true;
    r.step = std::atoll(std::string(v[1]).c_str());
    return std::optional<Result<Read>>{Result<Read>(std::move(r))};
  }
  return bad();
}

Status check_paths(const std::vector<std::string>& paths, const dist::Comm& comm) {
  if (paths.empty()) return make_error("", "no trace file given");
  const auto stdin_count = std::count(paths.begin(), paths.end(), "-");
  if (stdin_count > 1)
    return make_error("-", "standard input is given as more than one trace", "give - for one rank's trace at most");
  if (stdin_count > 0 && comm.size() > 1)
    return make_error("-", "standard input cannot be shared by the processes of an MPI run",
                      "give the trace as a file");
  // One file named twice (the same path, or a file and the folder that holds it) is said as such, not as
  // two files of one rank.
  std::vector<std::pair<std::string, size_t>> named;
  named.reserve(paths.size());
  for (size_t i = 0; i < paths.size(); ++i) {
    if (paths[i] == "-") continue;
    std::error_code ec;
    std::filesystem::path canon = std::filesystem::weakly_canonical(paths[i], ec);
    named.emplace_back(ec ? paths[i] : canon.string(), i);
  }
  std::sort(named.begin(), named.end());
  for (size_t k = 1; k < named.size(); ++k) {
    if (named[k].first != named[k - 1].first) continue;
    const size_t a = std::min(named[k].second, named[k - 1].second), b = std::max(named[k].second, named[k - 1].second);
    return make_error(paths[b], "is given twice as a trace (also as " + paths[a] + ")",
                      "give each rank's trace file once");
  }
  return {};
}

// Files from this size on disk are read one at a time: the reader shares each one's text among the
// threads itself, and reading several at once would hold several texts (up to GBs each) at once.
constexpr uintmax_t kReadAloneBytes = uintmax_t{8} << 20;

// Reads this process's shard of `paths`, the small files on the process's threads (one file each at a
// time: a rank's file of 1 MB is one or two of the reader's chunks, too few to share among threads;
// 1,024 such files were read on one core of two), the big ones one at a time, as in file order: the
// first that cannot be read is kept and every file after it is nullopt, whichever finished first.
std::vector<std::optional<Result<Read>>> read_shard(const std::vector<std::string>& paths, size_t begin, size_t end,
                                                    const LoadOptions& options) {
  std::vector<std::optional<Result<Read>>> out(end - begin);
  std::atomic<size_t> first_failed{out.size()};
  std::mutex alone;
  parallel_for(out.size(), [&](size_t k) {
    if (k > first_failed.load()) return;  // a file after one that failed is not read
    std::error_code ec;
    const uintmax_t bytes = paths[begin + k] == "-" ? 0 : std::filesystem::file_size(paths[begin + k], ec);
    std::unique_lock<std::mutex> big(alone, std::defer_lock);
    if (!ec && bytes >= kReadAloneBytes) big.lock();
    out[k].emplace(read_one(paths[begin + k], options));
    if (out[k]->ok()) return;
    size_t f = first_failed.load();
    while (k < f && !first_failed.compare_exchange_weak(f, k)) {
    }
  });
  for (size_t k = first_failed.load() + 1; k < out.size(); ++k) out[k].reset();
  return out;
}

// What process 0 still expects from each other process: one message per file of its shard, in order.
class Counted {
 public:
  explicit Counted(std::vector<size_t> bounds)
      : bounds_(std::move(bounds)), size_(static_cast<int>(bounds_.size()) - 1), next_(bounds_.begin(), bounds_.end() - 1) {}
  size_t expected() const { return bounds_.back() - bounds_[1]; }
  // The next message from any process, with its sender and the index of its file.
  Result<std::tuple<int, size_t, std::string>> next(dist::Comm& comm) {
    const double wait = dist::timeout_s();
    auto m = comm.recv_any(kTagShard, wait);
    if (!m.ok()) {
      for (int p = 1; p < size_; ++p) {
        const size_t end = bounds_[size_t(p) + 1];
        if (next_[size_t(p)] < end)
          return make_error("", fmt::format("process {} sent nothing for {:g} s ({} of its files to come)", p, wait,
                                            end - next_[size_t(p)]),
                            "a process is stuck or much slower than the others; EMO_MPI_TIMEOUT_S sets the wait");
      }
      return m.error();
    }
    const int p = m->first;
    if (p <= 0 || p >= size_ || next_[size_t(p)] >= bounds_[size_t(p) + 1])
      return make_error("", fmt::format("process {} sent a message it did not owe", p),
                        "run the same emo command on every process");
    return std::tuple<int, size_t, std::string>{p, next_[size_t(p)]++, std::move(m->second)};
  }

 private:
  std::vector<size_t> bounds_;
  int size_;
  std::vector<size_t> next_;
};

// Process 0's receipt of the other processes' shards: not yet, all received, or a wait that failed.
enum class Shards { kPending, kCollected, kLost };
Shards g_shards = Shards::kPending;
// The shards process 0 handed out (empty: none yet).
std::vector<size_t> g_bounds;

// Process 0 splits the files into shards of about equal bytes (a job's ranks differ: pipeline stages,
// embedding tables) and tells each process its own, so that every process works from one plan.
constexpr int kTagPlan = 10;
Status send_plan(const std::vector<std::string>& paths, dist::Comm& comm) {
  std::vector<uint64_t> bytes;
  bytes.reserve(paths.size());
  for (const std::string& p : paths) {
    std::error_code ec;
    const auto n = p == "-" ? 0 : std::filesystem::file_size(p, ec);
    bytes.push_back((ec ? 0 : n) + 1);  // a file that cannot be read yet counts as one byte: it errs quickly
  }
  g_bounds = dist::shard_by_weight(bytes, comm.size());
  for (int p = 1; p < comm.size(); ++p) {
    EMO_RETURN_IF_ERROR(comm.send(p, kTagPlan, dist::frame({std::to_string(g_bounds[size_t(p)]),
                                                             std::to_string(g_bounds[size_t(p) + 1])})));
  }
  return {};
}

// A process other than 0: its shard, from process 0's plan.
Result<std::pair<size_t, size_t>> receive_plan(size_t files, dist::Comm& comm) {
  auto m = comm.recv(dist::kRoot, kTagPlan, dist::timeout_s());
  if (!m.ok()) return m.error();
  auto f = dist::unframe(*m);
  if (f.ok() && f->size() == 2) {
    const auto b = std::strtoull(std::string((*f)[0]).c_str(), nullptr, 10);
    const auto e = std::strtoull(std::string((*f)[1]).c_str(), nullptr, 10);
    if (b <= e && e <= files) return std::pair<size_t, size_t>{b, e};
  }
  return make_error("", "process 0's plan of the shards does not fit the files given here",
                    "run the same emo command, with the same trace files, on every process");
}

// Intervals sorted and joined where they overlap: a GPU's busy time from its ops' [start, end).
using Intervals = std::vector<std::pair<int64_t, int64_t>>;
Intervals merged_intervals(Intervals iv) {
  std::sort(iv.begin(), iv.end());
  Intervals out;
  for (const auto& [b, e] : iv) {
    if (!out.empty() && b <= out.back().second) {
      out.back().second = std::max(out.back().second, e);
    } else {
      out.emplace_back(b, e);
    }
  }
  return out;
}

}  // namespace

Result<std::vector<std::string>> expand_trace_paths(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  out.reserve(paths.size());
  for (const std::string& p : paths) {
    std::error_code ec;
    if (p == "-" || !fs::is_directory(p, ec)) {
      out.push_back(p);
      continue;
    }
    std::vector<std::string> names, folders;
    fs::directory_iterator it(p, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      std::error_code de;
      if (name.front() != '.' && it->is_directory(de)) folders.push_back(name);
      const auto ends = [&](std::string_view suffix) {
        return name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
      };
      std::error_code fe;
      if (name.front() == '.' || !(ends(".json") || ends(".json.gz")) || !it->is_regular_file(fe)) continue;
      names.push_back(name);
    }
    if (ec) return make_error(p, "cannot list this folder: " + ec.message());
    if (names.empty()) {
      std::sort(folders.begin(), folders.end());
      std::string note = "give the folder torch.profiler wrote the rank files to, or the files themselves";
      if (!folders.empty()) {
        note = "it holds the folder" + std::string(folders.size() > 1 ? "s " : " ");
        for (size_t k = 0; k < folders.size() && k < 4; ++k) note += (k ? ", " : "") + folders[k];
        if (folders.size() > 4) note += fmt::format(" and {} more", folders.size() - 4);
        note += ": give the one that holds one run's rank files (subfolders are not read)";
      }
      return make_error(p, "no trace files in this folder (names ending in .json or .json.gz)", note);
    }
    std::sort(names.begin(), names.end());
    const std::string dir = p.back() == '/' ? p : p + "/";
    for (const std::string& n : names) out.push_back(dir + n);
  }
  return out;
}

Result<Workload> load(const std::vector<std::string>& paths, const LoadOptions& options) {
  return load(paths, options, dist::self());
}

Result<Workload> load(const std::vector<std::string>& paths, const LoadOptions& options, dist::Comm& comm) {
  if (!comm.is_root()) {
    Status st = serve_shard(paths, options, comm);
    if (!st.ok()) return st.error();
    return make_error("", std::string(kShardHandedOver));
  }
  g_bounds = {0, paths.size()};
  if (comm.size() > 1) {
    g_shards = Shards::kPending;
    EMO_RETURN_IF_ERROR(send_plan(paths, comm));
  }
  EMO_RETURN_IF_ERROR(check_paths(paths, comm));
  std::vector<std::optional<Result<Read>>> reads = read_shard(paths, g_bounds[0], g_bounds[1], options);
  // Every other process's messages as they come in (each process's in its file order); all of them are
  // received before any error is said, so that no process is left waiting on its sends.
  reads.resize(paths.size());
  Counted counted(g_bounds);
  std::optional<Error> failed;
  bool lost = false;  // a wait failed: the rest cannot be received
  for (size_t k = 0; k < counted.expected(); ++k) {
    auto m = counted.next(comm);
    if (!m.ok()) {
      if (!failed) failed = m.error();
      lost = true;
      break;
    }
    if (failed) continue;  // drained
    const auto& [p, i, bytes] = *m;
    auto d = decode(bytes, paths[i], p);
    if (!d.ok()) {
      failed = d.error();
      continue;
    }
    reads[i] = std::move(*d);
  }
  g_shards = lost ? Shards::kLost : Shards::kCollected;
  if (failed) return *failed;
  // The first file in file order that could not be read, as one process reading them all would say.
  std::vector<Read> got;
  got.reserve(reads.size());
  for (auto& r : reads) {
    if (!r) break;  // after a file that could not be read
    if (!r->ok()) return r->error();
    got.push_back(std::move(*r).value());
  }
  return finish(std::move(got), options);
}

Status serve_shard(const std::vector<std::string>& paths, const LoadOptions& options, dist::Comm& comm) {
  if (comm.is_root()) return make_error("", "process 0 assembles the step: it serves no shard");
  // The checks of every process, so that process 0 says them; nothing is read then.
  const bool bad = !check_paths(paths, comm).ok();
  auto plan = receive_plan(paths.size(), comm);
  if (!plan.ok()) return plan.error();
  const auto [begin, end] = *plan;
  if (bad) {
    for (size_t i = begin; i < end; ++i) EMO_RETURN_IF_ERROR(comm.send(dist::kRoot, kTagShard, dist::frame({"K"})));
    return comm.flush(dist::timeout_s());
  }
  bool failed = false;
  for (size_t i = begin; i < end; ++i) {
    std::string m;
    if (failed) {
      m = dist::frame({"K"});
    } else {
      Result<Read> r = read_one(paths[i], options);
      failed = !r.ok();
      m = encode(r);
    }
    EMO_RETURN_IF_ERROR(comm.send(dist::kRoot, kTagShard, std::move(m)));
  }
  return comm.flush(dist::timeout_s());
}

bool shards_collected() { return g_shards == Shards::kCollected; }

Status drain_shards(const std::vector<std::string>& paths, dist::Comm& comm) {
  if (!comm.is_root() || comm.size() < 2 || g_shards == Shards::kCollected) return {};
  if (g_shards == Shards::kLost) return make_error("", "the shards of the other processes could not all be received");
  g_shards = Shards::kCollected;
  if (g_bounds.size() != size_t(comm.size()) + 1) EMO_RETURN_IF_ERROR(send_plan(paths, comm));
  Counted counted(g_bounds);
  for (size_t k = 0; k < counted.expected(); ++k) {
    auto m = counted.next(comm);
    if (!m.ok()) {
      g_shards = Shards::kLost;
      return m.error();
    }
  }
  return {};
}

Result<Workload> assemble(std::vector<trace::RankTrace> ranks, const LoadOptions& options) {
  if (ranks.empty()) return make_error("", "no trace given");
  std::vector<Read> reads(ranks.size());
  for (size_t i = 0; i < ranks.size(); ++i) reads[i].trace = std::move(ranks[i]);
  return finish(std::move(reads), options);
}

namespace {
// Busy time per GPU of `g`'s ranks (rank indexes from `first_rank`): the union of its ops' intervals
// [start(n), end(n)), in (rank, device) order; idle is the step's `span_ns` minus it.
template <class Start, class End>
std::vector<GpuUsage> gpu_usage(const graph::Graph& g, size_t first_rank, int64_t span_ns, Start&& start, End&& end) {
  std::map<std::pair<uint32_t, int32_t>, std::vector<std::pair<int64_t, int64_t>>> per_gpu;
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (!graph::is_gpu(g.kind[n])) continue;
    const auto& lane = g.lanes[g.lane[n]];
    per_gpu[{uint32_t(first_rank + lane.rank), lane.device}].emplace_back(start(n), end(n));
  }
  std::vector<GpuUsage> gpus;
  for (auto& [key, iv] : per_gpu) {
    GpuUsage u;
    u.rank = key.first;
    u.device = key.second;
    u.ops = static_cast<int64_t>(iv.size());
    for (const auto& [b, e] : merged_intervals(std::move(iv))) u.busy_ns += e - b;
    u.idle_ns = std::max<int64_t>(0, span_ns - u.busy_ns);
    gpus.push_back(u);
  }
  return gpus;
}

double replay_error_pct(int64_t measured_ns, int64_t replayed_ns) {
  return measured_ns > 0 ? 100.0 * static_cast<double>(replayed_ns - measured_ns) / static_cast<double>(measured_ns)
                         : 0.0;
}
}  // namespace

Analysis analyze(const Workload& w) {
  const graph::Graph& g = w.graph;
  Analysis a;
  replay::Replayer rp(g);
  replay::Timeline tl;
  rp.run(tl);
  a.measured_span_ns = g.measured_span_ns();
  a.replayed_span_ns = tl.makespan_ns();
  a.replay_error_pct = replay_error_pct(a.measured_span_ns, a.replayed_span_ns);
  rp.slack({}, tl, a.slack_ns);
  a.critical_path = rp.critical_path({}, tl);
  a.gpus = gpu_usage(g, 0, tl.makespan_ns(), [&](NodeId n) { return tl.start(n); }, [&](NodeId n) { return tl.end(n); });
  return a;
}

// The GPUs' busy time of every process's part, gathered (the reading's tags are 10 and 11).
constexpr int kTagGpus = 12;

Result<Analysis> analyze_part(const graph::GraphPart& part, dist::Comm& comm) {
  const graph::Graph& g = part.graph;
  const replay::Shard shard = replay::make_shard(part);
  Analysis a;
  replay::ShardTimeline tl;
  EMO_RETURN_IF_ERROR(replay::run_distributed(shard, {}, comm, tl));
  std::vector<int64_t> measured(shard.num_points());
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    measured[graph::start_point(n)] = g.meas_start_ns[n];
    measured[graph::end_point(n)] = g.meas_end_ns[n];
  }
  auto span = replay::span_distributed(shard, measured, comm);
  if (!span) return span.error();
  a.measured_span_ns = (*span)[1] - (*span)[0];
  a.replayed_span_ns = tl.makespan_ns();
  a.replay_error_pct = replay_error_pct(a.measured_span_ns, a.replayed_span_ns);
  EMO_RETURN_IF_ERROR(replay::slack_distributed(shard, {}, tl, comm, a.slack_ns));
  auto path = replay::critical_path_distributed(shard, {}, tl, comm);
  if (!path) return path.error();
  a.critical_path = std::move(*path);
  // Each process's GPUs, then every process's in process order: the ranks' order.
  std::vector<int64_t> mine;
  for (const GpuUsage& u : gpu_usage(g, part.first_rank, tl.makespan_ns(),
                                     [&](NodeId n) { return tl.t_ns[graph::start_point(n)]; },
                                     [&](NodeId n) { return tl.t_ns[graph::end_point(n)]; })) {
    mine.insert(mine.end(), {int64_t(u.rank), u.device, u.ops, u.busy_ns, u.idle_ns});
  }
  auto all = dist::all_gather(comm, kTagGpus, dist::to_bytes(mine));
  if (!all) return make_error("", "the GPUs' busy time: " + all.error().message());
  for (size_t q = 0; q < all->size(); ++q) {
    auto v = dist::from_bytes((*all)[q], int(q));
    if (!v) return v.error();
    if (v->size() % 5 != 0) return make_error("", fmt::format("process {} sent its GPUs' busy time cut short", q));
    for (size_t i = 0; i < v->size(); i += 5) {
      a.gpus.push_back({uint32_t((*v)[i]), int32_t((*v)[i + 1]), (*v)[i + 2], (*v)[i + 3], (*v)[i + 4]});
    }
  }
  return a;
}

std::string node_category(const Workload& w, NodeId n) {
  const graph::Graph& g = w.graph;
  switch (g.kind[n]) {
    case NodeKind::kKernel: return "kernel";
    case NodeKind::kCommKernel:
    case NodeKind::kCollective: return "nccl";
    case NodeKind::kMemcpy: return "gpu_memcpy";
    case NodeKind::kMemset: return "gpu_memset";
    case NodeKind::kCpuGap: return "cpu_gap";
    default: break;
  }
  const auto& t = w.ranks[g.rank[n]];
  switch (t.events[g.event[n]].kind) {
    case trace::EventKind::kUserAnnotation: return "user_annotation";
    case trace::EventKind::kPythonFunction: return "python_function";
    case trace::EventKind::kRuntime: return "cuda_runtime";
    case trace::EventKind::kDriver: return "cuda_driver";
    case trace::EventKind::kOtherCpu: return "cpu_other";
    default: return "cpu_op";
  }
}

int64_t gpu_ops_on_path(const Workload& w, const Analysis& a) {
  const graph::Graph& g = w.graph;
  std::set<NodeId> seen;
  for (NodeId n : a.critical_path.nodes) {
    if (n < g.num_nodes() && graph::is_gpu(g.kind[n])) seen.insert(n);
  }
  return static_cast<int64_t>(seen.size());
}

std::vector<std::string> import_warnings(const Workload& w) {
  std::vector<std::string> out;
  int64_t bad = 0;
  for (const auto& t : w.ranks) bad += t.stats.error_count();
  if (bad > 0) out.push_back(fmt::format("{} malformed events skipped (see import_stats in --json)", bad));
  for (const trace::RankTrace& t : w.ranks) {
    if (t.stats.outside_profiler_window <= 0) continue;
    std::string example = t.stats.outside_profiler_window_example;
    if (example.rfind("name: ", 0) == 0) example = example.substr(6);
    out.push_back(fmt::format(
        "{}{} events outside the profiler window (or crossing its edge) dropped: the trace has no ProfilerStep, so the step is the "
        "profiler's window (its 'Trace' span){} (outside_profiler_window in import_stats of --json)",
        t.path.empty() ? "" : t.path + ": ", t.stats.outside_profiler_window,
        example.empty() ? "" : "; e.g. " + example));
  }
  return out;
}

LostLaunches lost_launches(const Workload& w) {
  LostLaunches out;
  for (const trace::RankTrace& t : w.ranks) {
    std::set<int64_t> done;
    for (const trace::Event& e : t.events)
      if (trace::is_gpu_op(e.kind) && e.correlation != trace::kNone) done.insert(e.correlation);
    for (const trace::Event& e : t.events) {
      if ((e.kind != trace::EventKind::kRuntime && e.kind != trace::EventKind::kDriver) || e.correlation == trace::kNone)
        continue;
      const trace::RuntimeCall call = trace::classify_runtime_call(t.strings.view(e.name));
      if (!trace::launches_gpu_work(call) || call == trace::RuntimeCall::kMemset) continue;
      ++out.launches;
      if (done.count(e.correlation) != 0) continue;
      if (out.lost++ == 0) out.example = fmt::format("{} (correlation {})", t.strings.view(e.name), e.correlation);
    }
  }
  return out;
}

UnrecordedWaits unrecorded_waits(const Workload& w, const Analysis& a) {
  UnrecordedWaits out;
  const graph::Graph& g = w.graph;
  std::vector<int64_t> per_rank(g.rank_paths.size(), 0);
  int64_t longest = 0;
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    // The builder makes a blocking call that waited for GPU ops a kSyncCall and leaves it its time after
    // the last of them ended (its whole time where they had all ended before it began). A call whose ops
    // the trace shows ending after it returned (clocks apart) waited for none of them: not counted.
    if (g.kind[n] != NodeKind::kSyncCall) continue;
    const trace::RuntimeCall call = trace::classify_runtime_call(g.strings.view(g.name[n]));
    if (call != trace::RuntimeCall::kDeviceSync && call != trace::RuntimeCall::kStreamSync &&
        call != trace::RuntimeCall::kEventSync)
      continue;
    const int64_t own = g.dur_ns[n];
    if (own < kUnrecordedWaitMinNs) continue;
    ++out.calls;
    out.wait_ns += own;
    const uint32_t r = g.rank[n];
    if (r < per_rank.size()) per_rank[r] += own;
    if (own > longest) {
      longest = own;
      const uint32_t lane = g.lane[n];
      out.example = fmt::format("{} on {}thread {}, {:.3f} ms of its {:.3f} ms after the last GPU op it could wait for ended",
                                g.strings.view(g.name[n]),
                                g.rank_paths.size() > 1 ? fmt::format("rank {} ", g.rank_id(graph::RankIndex(r))) : std::string(),
                                lane < g.lanes.size() ? g.lanes[lane].tid : 0, double(own) / 1e6,
                                double(g.meas_end_ns[n] - g.meas_start_ns[n]) / 1e6);
    }
  }
  if (a.measured_span_ns > 0) {
    for (int64_t v : per_rank) out.pct = std::max(out.pct, 100.0 * double(v) / double(a.measured_span_ns));
  }
  return out;
}

LateGpuStarts late_gpu_starts(const Workload& w, const Analysis& a) {
  LateGpuStarts out;
  const graph::Graph& g = w.graph;
  // Each GPU's ops in the step as measured, merged into busy intervals; built for the GPUs a long launch
  // segment of the path lands on.
  std::map<std::pair<uint32_t, int32_t>, Intervals> busy;
  auto busy_of = [&](uint32_t rank, int32_t device) -> const Intervals& {
    auto [it, fresh] = busy.try_emplace({rank, device});
    if (!fresh) return it->second;
    Intervals iv;
    for (NodeId n = 0; n < g.num_nodes(); ++n) {
      if (!graph::is_gpu(g.kind[n])) continue;
      const graph::Lane& l = g.lanes[g.lane[n]];
      if (l.rank == rank && l.device == device) iv.emplace_back(g.meas_start_ns[n], g.meas_end_ns[n]);
    }
    it->second = merged_intervals(std::move(iv));
    return it->second;
  };
  int64_t longest = 0;
  for (const replay::CriticalPath::Segment& s : a.critical_path.segments) {
    if (!s.is_edge || s.edge != graph::EdgeKind::kLaunch || s.ns < kUnrecordedWaitMinNs) continue;
    if (s.node >= g.num_nodes() || !graph::is_gpu(g.kind[s.node])) continue;
    // Queued behind an earlier step's work (Graph::queued_ops): the step is taken as the loop's period.
    if (std::find(g.queued_ops.begin(), g.queued_ops.end(), s.node) != g.queued_ops.end()) continue;
    const graph::Lane& lane = g.lanes[g.lane[s.node]];
    // The window the op waited in, as measured: from the launch call's return (the call's own time is the
    // host's: a slow first launch, one_time_calls) to the op's start.
    const int64_t end = g.meas_start_ns[s.node];
    int64_t begin = end - s.ns;
    if (s.from < g.num_nodes()) begin = std::max(begin, std::min(end, g.meas_end_ns[s.from]));
    int64_t idle = end - begin;
    for (const auto& [b, e] : busy_of(lane.rank, lane.device)) {
      if (b >= end) break;
      if (e > begin) idle -= std::min(e, end) - std::max(b, begin);
    }
    if (idle < kUnrecordedWaitMinNs) continue;
    ++out.ops;
    out.wait_ns += idle;
    if (idle > longest) {
      longest = idle;
      const bool named = s.from < g.num_nodes();
      out.example = fmt::format("{} launched by {} on {}stream {}, {:.3f} ms after its launch, its GPU idle in the step for "
                                "{:.3f} ms of it",
                                g.strings.view(g.name[s.node]), named ? g.strings.view(g.name[s.from]) : "its call",
                                g.rank_paths.size() > 1 ? fmt::format("rank {} ", g.rank_id(graph::RankIndex(lane.rank)))
                                                        : std::string(),
                                lane.stream, double(s.ns) / 1e6, double(idle) / 1e6);
    }
  }
  if (a.measured_span_ns > 0) out.pct = 100.0 * double(out.wait_ns) / double(a.measured_span_ns);
  return out;
}

OneTimeCalls one_time_calls(const Workload& w, const Analysis& a) {
  OneTimeCalls out;
  const graph::Graph& g = w.graph;
  const size_t ranks = g.rank_paths.size();
  // Each rank's GPU ops in the step as measured (every device of the rank), merged into busy intervals.
  std::vector<Intervals> busy(ranks);
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (graph::is_gpu(g.kind[n]) && g.rank[n] < ranks) busy[g.rank[n]].emplace_back(g.meas_start_ns[n], g.meas_end_ns[n]);
  }
  for (Intervals& iv : busy) iv = merged_intervals(std::move(iv));
  std::vector<int64_t> per_rank(ranks, 0);
  int64_t longest = 0;
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (g.kind[n] != NodeKind::kRuntime || g.rank[n] >= ranks) continue;
    const int64_t b = g.meas_start_ns[n], e = g.meas_end_ns[n];
    if (e - b < kOneTimeCallMinNs) continue;
    switch (trace::classify_runtime_call(g.strings.view(g.name[n]))) {
      case trace::RuntimeCall::kMemcpy:
      case trace::RuntimeCall::kDeviceSync:
      case trace::RuntimeCall::kStreamSync:
      case trace::RuntimeCall::kEventSync: continue;  // they wait on the GPU by design
      default: break;
    }
    const auto& iv = busy[g.rank[n]];
    int64_t idle = e - b;
    // Merged intervals: their ends are in order too. From the first that ends after b.
    auto it = std::lower_bound(iv.begin(), iv.end(), b, [](const std::pair<int64_t, int64_t>& x, int64_t v) { return x.second <= v; });
    for (; it != iv.end() && it->first < e; ++it) idle -= std::min(it->second, e) - std::max(it->first, b);
    if (idle < kOneTimeCallMinNs) continue;
    ++out.calls;
    out.ns += idle;
    per_rank[g.rank[n]] += idle;
    if (idle > longest) {
      longest = idle;
      // The operator the call ran in: the innermost CPU op of its thread that holds it.
      std::string inside;
      const trace::RankTrace& t = w.ranks[g.rank[n]];
      if (g.event[n] < t.events.size()) {
        const trace::Event& ce = t.events[g.event[n]];
        int64_t best = std::numeric_limits<int64_t>::max();
        for (const trace::Event& pe : t.events) {
          if (pe.ts_ns > ce.ts_ns) break;
          if (pe.lane != ce.lane || pe.kind != trace::EventKind::kCpuOp || pe.ts_ns + pe.dur_ns < ce.ts_ns + ce.dur_ns ||
              pe.dur_ns >= best)
            continue;
          best = pe.dur_ns;
          inside = fmt::format(" inside {}", t.name_of(pe));
        }
      }
      const uint32_t lane = g.lane[n];
      out.example = fmt::format("{}{} on {}thread {}, {:.3f} ms", g.strings.view(g.name[n]), inside,
                                ranks > 1 ? fmt::format("rank {} ", g.rank_id(graph::RankIndex(g.rank[n]))) : std::string(),
                                lane < g.lanes.size() ? g.lanes[lane].tid : 0, double(e - b) / 1e6);
    }
  }
  if (a.measured_span_ns > 0) {
    for (int64_t v : per_rank) out.pct = std::max(out.pct, 100.0 * double(v) / double(a.measured_span_ns));
  }
  return out;
}

EarlierLaunches earlier_launches(const Workload& w) {
  EarlierLaunches out;
  const graph::Graph& g = w.graph;
  int64_t longest = -1;
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (!graph::is_gpu(g.kind[n])) continue;
    const int64_t dur = g.meas_end_ns[n] - g.meas_start_ns[n];
    out.gpu_ns += dur;
    const graph::PointId p = graph::start_point(n);
    bool launched = false;
    for (uint32_t k = g.in_offsets[p]; k < g.in_offsets[p + 1] && !launched; ++k) {
      launched = g.edges[g.in_edges[k]].kind == graph::EdgeKind::kLaunch;
    }
    // An op without a correlation id cannot be traced to any call: not counted as launched before.
    if (launched || g.rank[n] >= w.ranks.size()) continue;
    const trace::RankTrace& t = w.ranks[g.rank[n]];
    if (g.event[n] >= t.events.size() || t.events[g.event[n]].correlation == trace::kNone) continue;
    ++out.ops;
    out.ns += dur;
    if (dur > longest) {
      longest = dur;
      const graph::Lane& lane = g.lanes[g.lane[n]];
      out.example = fmt::format("{} on {}stream {}, {:.3f} ms", g.strings.view(g.name[n]),
                                g.rank_paths.size() > 1 ? fmt::format("rank {} ", g.rank_id(graph::RankIndex(lane.rank)))
                                                        : std::string(),
                                lane.stream, double(dur) / 1e6);
    }
  }
  return out;
}

std::vector<std::string> step_warnings(const Workload& w, const Analysis& a) {
  std::vector<std::string> out = import_warnings(w);
  if (w.deprofiled) {
    const ProfilerCost& c = *w.deprofiled;
    out.push_back(fmt::format(
        "the profiler's cost was taken out of the step (--deprofile): host time x{:.4f}, {:.3f} ms traced -> {:.3f} ms "
        "(the job's untraced steps: {:.3f} ms){}; what follows is for the step as the job runs it, on a model of that "
        "cost with one factor for all host time (docs/replay.md, \"The profiler's cost\")",
        c.host_scale, static_cast<double>(c.traced_ns) / 1e6, static_cast<double>(c.replayed_ns) / 1e6,
        static_cast<double>(c.untraced_ns) / 1e6,
        c.explained ? "" : ", and even with no host time the step is longer than the untraced one"));
  }
  const trace::RankTrace& first = w.ranks.front();
  if (first.world_size > static_cast<int>(w.ranks.size())) {
    out.push_back(fmt::format("{} of the {} ranks of the run (distributedInfo.world_size) given: the step is "
                              "modelled from these ranks alone, their collectives' waits as recorded",
                              w.ranks.size(), first.world_size));
  }
  // Ranks of one run record the same iteration at about the same time: a different ProfilerStep, or
  // captures far apart (kCaptureGapDoubtS), say the files may come from different runs.
  for (size_t i = 1; i < w.ranks.size() && i < w.steps.size(); ++i) {
    if (w.steps[i] < 0 || w.steps[0] < 0 || w.steps[i] == w.steps[0]) continue;
    out.push_back(fmt::format("{} is ProfilerStep#{}, {} ProfilerStep#{}: the ranks' steps are not one iteration "
                              "(give --step N for the one they share)",
                              w.ranks[i].path, w.steps[i], first.path, w.steps[0]));
    break;
  }
  for (const trace::RankTrace& t : w.ranks) {
    const double apart_s = std::abs(double(t.origin_ns - first.origin_ns)) * 1e-9;
    if (t.origin_ns == 0 || first.origin_ns == 0 || !(apart_s > kCaptureGapDoubtS)) continue;
    out.push_back(fmt::format("{} was captured {:.0f} s from {} (more than {:g} s): traces of one run's step are "
                              "recorded together",
                              t.path, apart_s, first.path, kCaptureGapDoubtS));
    break;
  }
  for (const trace::RankTrace& t : w.ranks) {
    if (t.device_name.empty() || first.device_name.empty() || t.device_name == first.device_name) continue;
    out.push_back(fmt::format("{} ran on {}, {} on {}: traces of one run come from one kind of GPU", t.path,
                              t.device_name, first.path, first.device_name));
    break;
  }
  const graph::BuildStats& bs = w.graph.stats;
  if (bs.collectives_inconsistent > 0) {
    out.push_back(fmt::format("{} collective(s) matched across ranks disagree, e.g. {}: the files may come from "
                              "different jobs, or their process groups share names; the waits at those collectives "
                              "are doubtful (collectives_inconsistent in import_stats of --json)",
                              bs.collectives_inconsistent, bs.collectives_inconsistent_example));
  }
  if (bs.rank_groups > 1 &&
      double(bs.rank_group_span_min_ns) < (1.0 - kRankGroupSpanDoubtPct / 100) * double(bs.rank_group_span_max_ns)) {
    out.push_back(fmt::format("the ranks form {} groups that share no collective, with steps of different lengths "
                              "({}): separate jobs (or collectives that were not matched); a GPU's slack against "
                              "the longest group's step is not real: give each job's files on their own",
                              bs.rank_groups, bs.rank_groups_example));
  }
  const LostLaunches ll = lost_launches(w);
  if (ll.lost > 0 && ll.pct() >= kLostLaunchDoubtPct) {
    out.push_back(fmt::format("{} of the step's {} launch calls have no GPU activity in the trace (at least {:g} %), "
                              "e.g. {}: the GPU work they started is missing from the step",
                              ll.lost, ll.launches, kLostLaunchDoubtPct, ll.example));
  }
  const UnrecordedWaits uw = unrecorded_waits(w, a);
  if (uw.calls > 0 && uw.pct >= kUnrecordedWaitDoubtPct) {
    out.push_back(fmt::format("synchronize calls blocked {:.3f} ms ({:.0f} % of the step on the rank with the most) "
                              "after the GPU work the trace shows had ended, e.g. {}: the GPU ran work the trace does "
                              "not record (a graph whose kernels the profiler left out, another process), which the "
                              "step takes for host time and GPU idle",
                              double(uw.wait_ns) / 1e6, uw.pct, uw.example));
  }
  const LateGpuStarts ls = late_gpu_starts(w, a);
  if (ls.ops > 0 && ls.pct >= kUnrecordedWaitDoubtPct) {
    out.push_back(fmt::format("{} GPU op(s) on the critical path started {:.3f} ms ({:.0f} % of the step) after their "
                              "launch while their GPU ran nothing of the step, e.g. {}: the GPU was busy with work the "
                              "step does not show (kernels the profiler left out, an earlier step's queued work, another "
                              "process) or the op waited on a dependency the trace does not record; the step takes that "
                              "time for a fixed launch delay that no clock moves, so slack and savings on this step are "
                              "doubtful",
                              ls.ops, double(ls.wait_ns) / 1e6, ls.pct, ls.example));
  }
  const OneTimeCalls ot = one_time_calls(w, a);
  if (ot.calls > 0 && ot.pct >= kUnrecordedWaitDoubtPct) {
    out.push_back(fmt::format("{} runtime call(s) that do not wait on the GPU kept the host {:.3f} ms ({:.0f} % of the "
                              "step on the rank with the most) while its GPU ran nothing, e.g. {}: a first call's "
                              "one-time cost (CUDA loading a kernel's module, cuDNN or cuBLAS setting up, a context or "
                              "allocation made), which the job's later steps do not pay; this step is not the job's "
                              "steady state, so its host time and the GPU's slack are doubtful: record a later step "
                              "(torch.profiler's schedule with wait and warmup steps)",
                              ot.calls, double(ot.ns) / 1e6, ot.pct, ot.example));
  }
  const EarlierLaunches el = earlier_launches(w);
  if (el.ops > 0 && el.pct() >= kEarlierLaunchDoubtPct) {
    out.push_back(fmt::format("{} GPU op(s), {:.3f} ms of the step's {:.3f} ms of GPU op time ({:.0f} %), have no launch "
                              "call in the step, e.g. {}: launched before it (an earlier step's work still queued when "
                              "it began), they are counted in this step's GPU time and energy, so per-step figures can "
                              "exceed the job's by up to that share",
                              el.ops, double(el.ns) / 1e6, double(el.gpu_ns) / 1e6, el.pct(), el.example));
  }
  // The profiler's own cost: a step that took longer under the profiler than the same job's steps without
  // it (emo.torch.capture times a few before it records) ran a slower host than the job does.
  int slowed = 0;
  std::string slowed_first;
  for (size_t r = 0; r < w.ranks.size() && r < w.steps.size(); ++r) {
    const trace::RankTrace& t = w.ranks[r];
    if (t.untraced_step_ns.empty() || w.steps[r] < 0) continue;
    const auto st = std::find_if(t.steps.begin(), t.steps.end(), [&](const trace::Step& x) { return x.number == w.steps[r]; });
    if (st == t.steps.end() || st->dur_ns <= 0) continue;
    const double untraced = median(std::vector<double>(t.untraced_step_ns.begin(), t.untraced_step_ns.end()));
    const double pct = 100.0 * (double(st->dur_ns) / untraced - 1.0);
    if (!(pct > kProfilerSlowdownDoubtPct)) continue;
    if (slowed++ == 0) {
      slowed_first = fmt::format("{}{:.3f} ms under the profiler, {:.3f} ms without it (the median of {} steps "
                                 "emo.torch.capture timed, emo_untraced_step_us): {:+.0f} %",
                                 t.path.empty() ? "" : t.path + ": ", double(st->dur_ns) / 1e6, untraced / 1e6,
                                 t.untraced_step_ns.size(), pct);
    }
  }
  if (slowed > 0) {
    out.push_back(fmt::format("the profiler slowed the step on {} of {} ranks by more than {:g} % ({}): the host ran "
                              "slower in this trace than in the job, so GPU slack the trace shows may be the "
                              "profiler's own and a policy made from it can slow the job past its bound; take the "
                              "profiler's cost out first (--deprofile, or emo deprofile TRACE -o DIR), and measure the "
                              "policy in the job (emo apply --verify, or the runtime's verify phase)",
                              slowed, w.ranks.size(), kProfilerSlowdownDoubtPct, slowed_first));
  }
  if (std::abs(a.replay_error_pct) > kReplayDoubtPct) {
    out.push_back(fmt::format("the replay of the step takes {:+.1f} % the time the trace measured (more than "
                              "{:g} % off): what emo predicts rests on a replay that does not reproduce the step",
                              a.replay_error_pct, kReplayDoubtPct));
  }
  return out;
}

std::vector<std::string> device_warnings(const Workload& w, const std::string& profile_name) {
  // Model numbers as products spell them: "v100", "h100", "mi250", "t4" (a letter or three, then digits,
  // at the start of a word).
  auto models = [](const std::string& name) {
    std::vector<std::string> found;
    std::string low;
    for (char c : name) low.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    for (size_t i = 0; i < low.size();) {
      size_t j = i;
      while (j < low.size() && std::isalpha(static_cast<unsigned char>(low[j]))) ++j;
      size_t k = j;
      while (k < low.size() && std::isdigit(static_cast<unsigned char>(low[k]))) ++k;
      const bool word_start = i == 0 || !std::isalnum(static_cast<unsigned char>(low[i - 1]));
      if (word_start && j > i && j - i <= 3 && k > j) found.push_back(low.substr(i, k - i));  // "mi250x": mi250
      i = k > i ? k : i + 1;
    }
    return found;
  };
  const std::vector<std::string> wanted = models(profile_name);
  std::vector<std::string> out;
  // A trace whose deviceProperties name no model (vLLM's ROCm captures leave the name empty) is still an AMD
  // GPU's where its runtime calls are HIP's; an AMD profile ("mi250") is not judged by that.
  auto hip = [](const trace::RankTrace& t) {
    for (const trace::Event& e : t.events) {
      if (e.kind == trace::EventKind::kRuntime && t.strings.view(e.name).starts_with("hip")) return true;
    }
    return false;
  };
  for (const trace::RankTrace& t : w.ranks) {
    const std::vector<std::string> got = models(t.device_name);
    const std::string file = t.path.empty() ? "the trace " : t.path + " ";
    if (got.empty() && !wanted.empty() && !wanted.front().starts_with("mi") && hip(t)) {
      out.push_back(fmt::format("{}was recorded on an AMD GPU (its runtime calls are HIP's; its deviceProperties name no "
                                "model), not the {} of --device: its GPU times are taken as {}'s",
                                file, profile_name, profile_name));
      break;
    }
    if (got.empty() || wanted.empty() || std::find(got.begin(), got.end(), wanted.front()) != got.end()) continue;
    out.push_back(fmt::format("{}was recorded on {}, not the {} of --device: its GPU times are taken as {}'s", file,
                              t.device_name, profile_name, profile_name));
    break;
  }
  return out;
}

namespace {

double us(int64_t ns) { return static_cast<double>(ns) / 1000.0; }
double round3(double v) { return std::round(v * 1000.0) / 1000.0; }

}  // namespace

nlohmann::json to_json(const Workload& w, const Analysis& a, bool per_kernel) {
  const graph::Graph& g = w.graph;
  const int64_t begin = g.measured_begin_ns();
  using nlohmann::json;
  json j;
  j["events"] = w.events;
  j["nodes"] = g.num_nodes();
  j["edges"] = g.edges.size();
  json ranks = json::array();
  for (size_t r = 0; r < w.ranks.size(); ++r) {
    ranks.push_back({{"rank", g.rank_ids[r]},
                     {"file", w.ranks[r].path},
                     {"device", w.ranks[r].device_name},
                     {"step", w.steps[r]},
                     {"events", w.ranks[r].events.size()},
                     {"clock_offset_us", round3(us(g.rank_offset_ns[r]))}});
  }
  j["ranks"] = ranks;
  j["measured_span_us"] = round3(us(a.measured_span_ns));
  j["replayed_span_us"] = round3(us(a.replayed_span_ns));
  j["replay_error_pct"] = std::round(a.replay_error_pct * 1e4) / 1e4;
  json breakdown = json::object();
  for (const auto& part : a.critical_path.breakdown) breakdown[part.category] = round3(us(part.ns));
  // GPU ops on the path: all of them for ordinary steps; the longest kMaxPathOps
  // for huge ones (the full path is in --critical-path-csv).
  constexpr size_t kMaxPathOps = 1000;
  std::vector<NodeId> on_path;
  for (NodeId n : a.critical_path.nodes) {
    if (graph::is_gpu(g.kind[n]) || g.kind[n] == NodeKind::kCollective) on_path.push_back(n);
  }
  const size_t path_ops = on_path.size();
  if (on_path.size() > kMaxPathOps) {
    std::stable_sort(on_path.begin(), on_path.end(),
                     [&](NodeId x, NodeId y) { return g.dur_ns[x] > g.dur_ns[y]; });
    on_path.resize(kMaxPathOps);
    std::sort(on_path.begin(), on_path.end());
  }
  json path = json::array();
  for (NodeId n : on_path) {
    path.push_back({{"name", std::string(g.strings.view(g.name[n]))},
                    {"kind", graph::to_string(g.kind[n])},
                    {"rank", g.rank_ids[g.rank[n]]},
                    {"start_us", round3(us(g.meas_start_ns[n] - begin))},
                    {"dur_us", round3(us(g.dur_ns[n]))}});
  }
  j["critical_path"] = {{"length_us", round3(us(a.critical_path.length_ns))},
                        {"breakdown", breakdown},
                        {"nodes", a.critical_path.nodes.size()},
                        {"gpu_ops_total", path_ops},
                        {"gpu_ops_on_path", gpu_ops_on_path(w, a)},
                        {"gpu_ops", path}};
  json gpus = json::array();
  for (const auto& u : a.gpus) {
    gpus.push_back({{"rank", g.rank_ids[u.rank]},
                    {"device", u.device},
                    {"ops", u.ops},
                    {"busy_us", round3(us(u.busy_ns))},
                    {"idle_us", round3(us(u.idle_ns))}});
  }
  j["gpus"] = gpus;
  // Slack of GPU ops: how many are critical, and a histogram.
  int64_t ops = 0, critical = 0;
  std::vector<int64_t> buckets(6, 0);  // 0, <10µs, <100µs, <1ms, <10ms, more
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (!graph::is_gpu(g.kind[n])) continue;
    ++ops;
    int64_t s = a.slack_ns[n];
    if (s == 0) ++critical;
    size_t b = s == 0 ? 0 : s < 10'000 ? 1 : s < 100'000 ? 2 : s < 1'000'000 ? 3 : s < 10'000'000 ? 4 : 5;
    ++buckets[b];
  }
  // gpu_ops_on_critical_path is the historical name of the zero-slack count
  // (kept for readers of older output); gpu_ops_with_no_slack says what it is.
  // The ops on the extracted path are critical_path.gpu_ops_on_path.
  j["slack"] = {{"gpu_ops", ops},
                {"gpu_ops_on_critical_path", critical},
                {"gpu_ops_with_no_slack", critical},
                {"histogram", {{"0", buckets[0]}, {"<10us", buckets[1]}, {"<100us", buckets[2]},
                               {"<1ms", buckets[3]}, {"<10ms", buckets[4]}, {">=10ms", buckets[5]}}}};
  json stats = json::array();
  int64_t outside_window = 0;
  for (const auto& t : w.ranks) outside_window += t.stats.outside_profiler_window;
  for (size_t r = 0; r < w.ranks.size(); ++r) {
    for (const auto& row : w.ranks[r].stats.rows) {
      stats.push_back({{"rank", g.rank_ids[r]}, {"what", row.what}, {"count", row.count},
                       {"example", row.example}, {"error", row.is_error}});
    }
  }
  const auto& bs = g.stats;
  j["import_stats"] = {{"events", stats},
                       {"gpu_ops_without_launch", bs.gpu_ops_without_launch},
                       {"edges_dropped_inconsistent", bs.edges_dropped_inconsistent},
                       {"collectives_matched", bs.collectives_matched},
                       {"collective_kernels_unmatched", bs.collectives_unmatched},
                       {"collectives_inconsistent", bs.collectives_inconsistent},
                       {"collectives_inconsistent_example", bs.collectives_inconsistent_example},
                       {"rank_groups", bs.rank_groups},
                       {"rank_groups_example", bs.rank_groups_example},
                       {"cross_stream_edges_from_sync_events", bs.cross_stream_from_sync_events},
                       {"cross_stream_edges_from_runtime_pairs", bs.cross_stream_from_runtime_pairs},
                       {"cross_stream_edges_inferred", bs.cross_stream_inferred},
                       {"outside_profiler_window", outside_window},
                       // Host waits (docs/replay.md): threads that only wait, left out of the
                       // step's span and critical path; blocked-wait frames on working threads;
                       // host polling loops made GPU -> CPU waits.
                       {"waiting_threads", bs.waiting_threads},
                       {"waiting_thread_nodes", bs.waiting_thread_nodes},
                       {"waiting_thread_span_us", round3(us(bs.waiting_thread_span_ns))},
                       {"waiting_thread_example", bs.waiting_thread_example},
                       {"wait_frames", bs.wait_frames},
                       {"wait_frame_us", round3(us(bs.wait_frame_ns))},
                       {"wait_frame_example", bs.wait_frame_example},
                       {"poll_query_loops", bs.poll_query_loops},
                       {"poll_ranges", bs.poll_ranges},
                       {"poll_wait_us", round3(us(bs.poll_wait_ns))},
                       {"poll_example", bs.poll_example},
                       {"thread_flow_edges", bs.thread_flow_edges},
                       {"thread_waits", bs.thread_waits},
                       {"thread_wait_us", round3(us(bs.thread_wait_ns))},
                       {"thread_wait_example", bs.thread_wait_example},
                       // GPU ops that waited on an earlier step's queued GPU work (measured_span_us is
                       // then the loop's period; docs/replay.md).
                       {"queued_waits", bs.queued_waits},
                       {"queued_wait_us", round3(us(bs.queued_wait_ns))},
                       {"queued_wait_example", bs.queued_wait_example},
                       // The step's GPU work ran this long past its host, into the next step's host time,
                       // as the step before's ran into it without holding it: measured_span_us is then the
                       // loop's period (0 where the step is no such loop; docs/replay.md).
                       {"gpu_tail_us", round3(us(bs.gpu_tail_ns))},
                       {"notes", bs.notes}};
  if (per_kernel) {
    json ks = json::array();
    for (NodeId n = 0; n < g.num_nodes(); ++n) {
      if (!graph::is_gpu(g.kind[n])) continue;
      ks.push_back({{"name", std::string(g.strings.view(g.name[n]))},
                    {"rank", g.rank_ids[g.rank[n]]},
                    {"stream", g.lanes[g.lane[n]].stream},
                    {"start_us", round3(us(g.meas_start_ns[n] - begin))},
                    {"dur_us", round3(us(g.meas_end_ns[n] - g.meas_start_ns[n]))},
                    {"slack_us", round3(us(a.slack_ns[n]))}});
    }
    j["kernels"] = ks;
  }
  return j;
}

std::string to_text(const Workload& w, const Analysis& a) {
  const graph::Graph& g = w.graph;
  std::string s;
  s += fmt::format("{} rank(s), {} events, {} nodes, {} edges\n", w.ranks.size(), w.events, g.num_nodes(),
                   g.edges.size());
  const std::string queued =
      !g.loop_period()
          ? std::string()
          : fmt::format(" (the loop's period: {}; from the host's start to the GPU's end, {:.3f} ms)",
                        g.queued_ops.empty() ? "its GPU tail runs into the next step's host time"
                                             : "its GPU runs behind its host",
                        us(g.measured_end_ns() - g.measured_begin_ns()) / 1000);
  s += fmt::format("step span: measured {:.3f} ms{}, replayed {:.3f} ms (error {:+.3f} %)\n",
                   us(a.measured_span_ns) / 1000, queued, us(a.replayed_span_ns) / 1000, a.replay_error_pct);
  s += "critical path:";
  for (const auto& part : a.critical_path.breakdown) {
    if (part.ns > 0) {
      s += fmt::format(" {} {:.1f}%", part.category,
                       100.0 * static_cast<double>(part.ns) / static_cast<double>(std::max<int64_t>(1, a.critical_path.length_ns)));
    }
  }
  s += "\n";
  for (const auto& u : a.gpus) {
    s += fmt::format("rank {} gpu {}: {} ops, busy {:.3f} ms, idle {:.3f} ms\n", g.rank_ids[u.rank], u.device,
                     u.ops, us(u.busy_ns) / 1000, us(u.idle_ns) / 1000);
  }
  int64_t ops = 0, no_slack = 0;
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (!graph::is_gpu(g.kind[n])) continue;
    ++ops;
    no_slack += a.slack_ns[n] == 0;
  }
  // Two different counts: the ops the extracted path runs through, and the ops
  // that cannot grow without moving the step's end (a superset: an op that
  // ends exactly when a blocking CPU call returns has no slack, but the path
  // goes through the CPU call).
  s += fmt::format("GPU ops on the critical path: {} of {}\n", gpu_ops_on_path(w, a), ops);
  s += fmt::format("GPU ops with no slack: {} of {}\n", no_slack, ops);
  if (g.stats.gpu_ops_without_launch > 0) {
    s += fmt::format("note: {} GPU ops have no launch call in the step\n", g.stats.gpu_ops_without_launch);
  }
  // A trace without ProfilerStep (a vLLM capture, a profiler started by hand) is taken whole: say so, as the
  // JSON's ranks[].step = -1 does.
  int whole = 0;
  std::string whole_first;
  for (size_t r = 0; r < w.ranks.size() && r < w.steps.size(); ++r) {
    if (w.steps[r] >= 0) continue;
    if (whole++ == 0) whole_first = w.ranks[r].path;
  }
  if (whole > 0) {
    s += fmt::format("note: no ProfilerStep in {}{}: the step is the profiler's whole window\n", whole_first,
                     whole > 1 ? fmt::format(" and {} more rank file(s)", whole - 1) : std::string());
  }
  const graph::BuildStats& bs = g.stats;
  if (bs.waiting_threads > 0) {
    s += fmt::format(
        "note: {} thread(s) that launch no GPU work (only wait) left out of the step's span and critical path"
        "{}; e.g. {} (waiting_threads in import_stats of --json)\n",
        bs.waiting_threads,
        bs.waiting_thread_span_ns > 0 ? fmt::format(", {:.3f} ms of span", us(bs.waiting_thread_span_ns) / 1000) : "",
        bs.waiting_thread_example);
  }
  if (bs.wait_frames > 0) {
    s += fmt::format("note: {} blocked-wait frame(s) on working threads, {:.3f} ms, counted as waits, not CPU work; "
                     "e.g. {}\n",
                     bs.wait_frames, us(bs.wait_frame_ns) / 1000, bs.wait_frame_example);
  }
  if (bs.poll_query_loops + bs.poll_ranges > 0) {
    s += fmt::format("note: {} host polling loop(s) ({} of event/stream queries, {} annotated ranges) wait on the GPU "
                     "op they poll, {:.3f} ms; e.g. {}\n",
                     bs.poll_query_loops + bs.poll_ranges, bs.poll_query_loops, bs.poll_ranges,
                     us(bs.poll_wait_ns) / 1000, bs.poll_example);
  }
  if (bs.thread_flow_edges + bs.thread_waits > 0) {
    s += fmt::format("note: {} forward -> backward dependencies across threads (fwdbwd flows){}\n", bs.thread_flow_edges,
                     bs.thread_waits > 0 ? fmt::format("; {} thread(s) wait for the autograd thread, {:.3f} ms; e.g. {}",
                                                       bs.thread_waits, us(bs.thread_wait_ns) / 1000, bs.thread_wait_example)
                                         : std::string());
  }
  if (bs.queued_waits > 0) {
    s += fmt::format("note: {} GPU op(s) of the step waited for work launched before it (an earlier step's, still "
                     "queued on a GPU that runs behind its host), e.g. {}: the step is the loop's period, the longer "
                     "of its host's span and the time from the first of them starting to its end (queued_waits in "
                     "import_stats of --json)\n",
                     bs.queued_waits, bs.queued_wait_example);
  }
  if (g.gpu_tail_loop) {
    s += fmt::format("note: the step's GPU work runs {:.3f} ms past its host, into the next step's host time, as the "
                     "step before's ran into this one without holding its host or its GPU ops: a loop that never "
                     "waits on its GPU, whose step is the loop's period, the longer of its host's span and each GPU "
                     "stream's span (gpu_tail_us in import_stats of --json)\n",
                     us(bs.gpu_tail_ns) / 1000);
  }
  if (g.stats.edges_dropped_inconsistent > 0) {
    s += fmt::format(
        "note: {} dependencies were left out: the trace's own times contradict them (e.g. a kernel that "
        "starts before its launch; see import_stats in --json)\n",
        g.stats.edges_dropped_inconsistent);
  }
  return s;
}

namespace {
std::string csv_quote(std::string_view text) {
  std::string q = "\"";
  for (char c : text) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + '"';
}
}  // namespace

std::string critical_path_csv(const Workload& w, const Analysis& a) {
  const graph::Graph& g = w.graph;
  std::string s = "segment,kind,rank,name,start_us,dur_us\n";
  const int64_t begin = g.measured_begin_ns();
  for (const auto& seg : a.critical_path.segments) {
    const NodeId n = seg.is_edge ? seg.from : seg.node;
    std::string name(g.strings.view(g.name[n]));
    if (seg.is_edge) name += " -> " + std::string(g.strings.view(g.name[seg.node]));
    s += fmt::format("{},{},{},{},{:.3f},{:.3f}\n", seg.is_edge ? "edge" : "node",
                     seg.is_edge ? graph::to_string(seg.edge) : graph::to_string(g.kind[n]), g.rank_ids[g.rank[n]],
                     csv_quote(name), us(seg.start_ns - begin), us(seg.ns));
  }
  return s;
}

std::string kernels_csv(const Workload& w, const Analysis& a) {
  const graph::Graph& g = w.graph;
  std::string s = "rank,stream,name,start_us,dur_us,slack_us,critical\n";
  const int64_t begin = g.measured_begin_ns();
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (!graph::is_gpu(g.kind[n])) continue;
    s += fmt::format("{},{},{},{:.3f},{:.3f},{:.3f},{}\n", g.rank_ids[g.rank[n]], g.lanes[g.lane[n]].stream,
                     csv_quote(g.strings.view(g.name[n])), us(g.meas_start_ns[n] - begin),
                     us(g.meas_end_ns[n] - g.meas_start_ns[n]), us(a.slack_ns[n]), a.slack_ns[n] == 0 ? 1 : 0);
  }
  return s;
}

}  // namespace emo::analysis
