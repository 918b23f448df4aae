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
#include <numeric>
#include <optional>
#include <set>
#include <tuple>

#include "emo/base/parallel.h"
#include "emo/base/stats.h"
#include "emo/dist/dist.h"
#include "emo/replay/distributed.h"
#include "emo/trace/runtime_calls.h"
#include "internal.h"

namespace emo::analysis {

using graph::NodeId;
using graph::NodeKind;
using detail::Intervals;
using detail::merged_intervals;

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

// The checks across ranks (one world size) and their order: the files' indexes by distributedInfo.rank where
// every file has one (no rank twice), else in file order.
bool all_ranked(const std::vector<const trace::RankTrace*>& t) {
  return std::all_of(t.begin(), t.end(), [](const trace::RankTrace* x) { return x->rank >= 0; });
}

Result<std::vector<size_t>> rank_order(const std::vector<const trace::RankTrace*>& heads) {
  if (heads.empty()) return make_error("", "no trace given");
  // One run: the files that name a world size (distributedInfo.world_size) all name the same one.
  const trace::RankTrace* sized = nullptr;
  for (const trace::RankTrace* t : heads) {
    if (t->world_size < 1) continue;
    if (sized && t->world_size != sized->world_size)
      return make_error(t->path,
                        fmt::format("world_size {} is not the world_size {} of {}", t->world_size, sized->world_size,
                                    sized->path),
                        "give one trace file per rank of the same run");
    if (!sized) sized = t;
  }
  if (sized && heads.size() > 1) {
    for (const trace::RankTrace* t : heads) {
      if (t->world_size < 1)
        return make_error(t->path,
                          fmt::format("has no distributedInfo.world_size, while {} has world_size {}: not one run",
                                      sized->path, sized->world_size),
                          "give one trace file per rank of the same run");
    }
  }
  std::vector<size_t> order(heads.size());
  std::iota(order.begin(), order.end(), size_t{0});
  if (all_ranked(heads) && heads.size() > 1) {
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return heads[a]->rank < heads[b]->rank; });
    for (size_t i = 1; i < order.size(); ++i) {
      const trace::RankTrace &t = *heads[order[i]], &before = *heads[order[i - 1]];
      if (t.rank == before.rank) {
        return make_error(t.path, fmt::format("rank {} is also the rank of {}", t.rank, before.path),
                          "give one trace file per rank of the same run (a folder that a profiler wrote several "
                          "cycles into holds several files per rank: give one cycle's files)");
      }
    }
  }
  return order;
}

// The checks across ranks, the order by rank, the step of each (where not selected yet) and the graph.
Result<Workload> finish(std::vector<Read> reads, const LoadOptions& options) {
  std::vector<const trace::RankTrace*> heads;
  for (const Read& r : reads) heads.push_back(&r.trace);
  auto order = rank_order(heads);
  if (!order) return order.error();
  const bool ranked = all_ranked(heads);
  {
    std::vector<Read> sorted;
    sorted.reserve(reads.size());
    for (size_t i : *order) sorted.push_back(std::move(reads[i]));
    reads = std::move(sorted);
  }
  if (!ranked) {
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


}  // namespace

Intervals detail::merged_intervals(Intervals iv) {
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

// ---- load_part: every process keeps its own ranks ----
namespace {
// Process 0's shards of the files (bounds), the files' headers (every process's, to every process) and the
// traces moved to the process that builds their rank.
constexpr int kTagPartPlan = 14, kTagHeads = 15, kTagMove = 16;

// The files' shards as process 0 splits them (send_plan's rule), on every process; or process 0's error
// where it cannot go on (`before`, then the paths' checks): an empty plan, on which the others stop.
Result<std::vector<size_t>> part_plan(const std::vector<std::string>& paths, const Status& before, dist::Comm& comm) {
  const size_t P = size_t(comm.size());
  if (comm.is_root()) {
    Status st = before;
    if (st.ok()) st = check_paths(paths, comm);
    std::vector<size_t> bounds;
    if (st.ok()) {
      std::vector<uint64_t> bytes;
      for (const std::string& p : paths) {
        std::error_code ec;
        const auto n = p == "-" ? 0 : std::filesystem::file_size(p, ec);
        bytes.push_back((ec ? 0 : n) + 1);  // a file that cannot be read yet counts as one byte: it errs quickly
      }
      bounds = dist::shard_by_weight(bytes, comm.size());
    }
    const std::vector<int64_t> v(bounds.begin(), bounds.end());
    for (int q = 1; q < comm.size(); ++q) EMO_RETURN_IF_ERROR(comm.send(q, kTagPartPlan, dist::to_bytes(v)));
    if (!st.ok()) {
      EMO_RETURN_IF_ERROR(comm.flush(dist::timeout_s()));
      return st.error();
    }
    return bounds;
  }
  auto m = comm.recv(dist::kRoot, kTagPartPlan, dist::timeout_s());
  if (!m) return m.error();
  auto v = dist::from_bytes(*m, dist::kRoot);
  if (!v) return v.error();
  if (v->empty()) return make_error("", "process 0 ended the run before the reading (its error is said there)");
  bool fits = v->size() == P + 1 && v->front() == 0 && size_t(v->back()) == paths.size();
  for (size_t i = 1; fits && i < v->size(); ++i) fits = (*v)[i] >= (*v)[i - 1];
  if (!fits) {
    return make_error("", "process 0's plan of the shards does not fit the files given here",
                      "run the same emo command, with the same trace files, on every process");
  }
  return std::vector<size_t>(v->begin(), v->end());
}

// A file's header as every process learns it: 'T' (read: its step, path, rank, world size, events), 'R' and
// 'S' as encode() says them, 'K' (not read).
std::string encode_head(const std::optional<Result<Read>>& r) {
  if (!r) return dist::frame({"K"});
  if (!r->ok() || (*r)->select_error) return encode(*r);
  const trace::RankTrace& t = (*r)->trace;
  const std::string step = std::to_string((*r)->step), rank = std::to_string(t.rank),
                    world = std::to_string(t.world_size), events = std::to_string(t.events.size());
  return dist::frame({"H", step, t.path, rank, world, events});
}

struct Head {
  std::optional<Result<Read>> read;  // the header only (no events)
  int64_t events = 0;
};

Result<Head> decode_head(std::string_view bytes, const std::string& path, int from) {
  auto f = dist::unframe(bytes);
  if (f.ok() && f->size() == 6 && (*f)[0] == "H") {
    const std::vector<std::string_view>& v = *f;
    Read r;
    r.selected = true;
    r.step = std::atoll(std::string(v[1]).c_str());
    r.trace.path = std::string(v[2]);
    r.trace.rank = std::atoi(std::string(v[3]).c_str());
    r.trace.world_size = std::atoi(std::string(v[4]).c_str());
    return Head{Result<Read>(std::move(r)), std::atoll(std::string(v[5]).c_str())};
  }
  auto d = decode(bytes, path, from);
  if (!d) return d.error();
  return Head{std::move(*d), 0};
}
}  // namespace

Result<WorkloadPart> load_part(const std::vector<std::string>& paths, const LoadOptions& options, dist::Comm& comm,
                               const Status& before, const std::vector<size_t>* rank_bounds) {
  const Status& st = before;
  const int P = comm.size(), me = comm.rank();
  auto bounds = part_plan(paths, st, comm);
  if (!bounds) return bounds.error();
  const size_t begin = (*bounds)[size_t(me)], end = (*bounds)[size_t(me) + 1];
  std::vector<std::optional<Result<Read>>> mine = read_shard(paths, begin, end, options);
  // Every file's header to every process, so that each says the first error one process would and takes
  // the same ranks.
  std::vector<std::string> heads_of_mine;
  for (const auto& r : mine) heads_of_mine.push_back(encode_head(r));
  auto all = dist::all_gather(comm, kTagHeads, dist::frame({heads_of_mine.begin(), heads_of_mine.end()}));
  if (!all) return all.error();
  std::vector<Head> heads;
  heads.reserve(paths.size());
  for (int q = 0; q < P; ++q) {
    auto f = dist::unframe((*all)[size_t(q)]);
    const size_t b = (*bounds)[size_t(q)], e = (*bounds)[size_t(q) + 1];
    if (!f || f->size() != e - b) return make_error("", fmt::format("process {} sent its files' headers cut short", q));
    for (size_t i = b; i < e; ++i) {
      auto h = decode_head((*f)[i - b], paths[i], q);
      if (!h) return h.error();
      heads.push_back(std::move(*h));
    }
  }
  // The first file in file order that could not be read, then the checks across ranks.
  std::vector<const trace::RankTrace*> ts;
  for (const Head& h : heads) {
    if (!h.read) break;
    if (!h.read->ok()) return h.read->error();
    ts.push_back(&(*h.read)->trace);
  }
  auto order = rank_order(ts);
  if (!order) return order.error();
  const bool ranked = all_ranked(ts);
  std::vector<uint64_t> weights;
  for (size_t i : *order) {
    const Read& r = *heads[i].read.value();
    if (r.select_error) return *r.select_error;
    weights.push_back(uint64_t(heads[i].events) + 1);
  }
  // Each process builds a contiguous part of the ranks in rank order, of about equal events (or the part
  // it was given); a trace read by another process moves to it.
  if (rank_bounds != nullptr) {
    bool fits = rank_bounds->size() == size_t(P) + 1 && rank_bounds->front() == 0 && rank_bounds->back() == weights.size();
    for (size_t i = 1; fits && i < rank_bounds->size(); ++i) fits = (*rank_bounds)[i] >= (*rank_bounds)[i - 1];
    if (!fits) {
      return make_error("", fmt::format("{} rank file(s), where the step's parts over the {} processes hold {} rank(s)",
                                        weights.size(), P, rank_bounds->empty() ? 0 : rank_bounds->back()),
                        "give a trace per rank of the step");
    }
  }
  const std::vector<size_t> parts = rank_bounds != nullptr ? *rank_bounds : dist::shard_by_weight(weights, P);
  std::vector<int> owner(paths.size(), 0);
  std::vector<size_t> place(paths.size(), 0);  // its place in rank order
  for (int q = 0; q < P; ++q) {
    for (size_t k = parts[size_t(q)]; k < parts[size_t(q) + 1]; ++k) owner[(*order)[k]] = q, place[(*order)[k]] = k;
  }
  const size_t first = parts[size_t(me)], count = parts[size_t(me) + 1] - first;
  WorkloadPart w;
  w.ranks.resize(count);
  w.steps.resize(count);
  for (const Head& h : heads) w.events += h.events;
  size_t expected = 0;
  for (size_t k = first; k < first + count; ++k) expected += (*order)[k] < begin || (*order)[k] >= end;
  for (size_t i = begin; i < end; ++i) {
    Read& r = *mine[i - begin].value();
    if (!ranked) r.trace.rank = static_cast<int>(place[i]);
    if (owner[i] == me) {
      w.steps[place[i] - first] = r.step;
      w.ranks[place[i] - first] = std::move(r.trace);
      continue;
    }
    EMO_RETURN_IF_ERROR(comm.send(owner[i], kTagMove, dist::frame({std::to_string(i), trace::to_wire(r.trace)})));
    r.trace = trace::RankTrace();  // sent: not held here any longer
  }
  mine.clear();
  std::vector<uint8_t> got(count, 0);
  for (size_t k = 0; k < expected; ++k) {
    auto m = comm.recv_any(kTagMove, dist::timeout_s());
    if (!m) return make_error("", "the traces of this process's ranks: " + m.error().message());
    auto f = dist::unframe(m->second);
    const size_t i = f && f->size() == 2 ? size_t(std::strtoull(std::string((*f)[0]).c_str(), nullptr, 10)) : paths.size();
    if (i >= paths.size() || owner[i] != me || (i >= begin && i < end)) {
      return make_error("", fmt::format("process {} sent a trace this process does not build", m->first),
                        "run the same emo command, with the same trace files, on every process");
    }
    auto t = trace::from_wire((*f)[1]);
    if (!t) return t.error();
    if (got[place[i] - first]++) return make_error("", fmt::format("process {} sent the trace of {} twice", m->first, paths[i]));
    w.ranks[place[i] - first] = std::move(*t);
    w.steps[place[i] - first] = (*heads[i].read.value()).step;
    if (!ranked) w.ranks[place[i] - first].rank = static_cast<int>(place[i]);
  }
  EMO_RETURN_IF_ERROR(comm.flush(dist::timeout_s()));
  auto part = graph::build_part(w.ranks, comm, options.build);
  if (!part) return part.error();
  w.part = std::move(*part);
  w.part.graph.step_of_rank = w.steps;
  if (options.deprofile) return detail::without_profiler_cost_part(std::move(w), options, comm);
  return w;
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

Result<Analysis> analyze_part(const graph::GraphPart& part, dist::Comm& comm, replay::ShardTimeline* replayed) {
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
  if (replayed) *replayed = std::move(tl);
  return a;
}

std::string node_category(const Workload& w, NodeId n) { return node_category(w.graph, w.ranks, n); }

std::string node_category(const graph::Graph& g, const std::vector<trace::RankTrace>& ranks, NodeId n) {
  switch (g.kind[n]) {
    case NodeKind::kKernel: return "kernel";
    case NodeKind::kCommKernel:
    case NodeKind::kCollective: return "nccl";
    case NodeKind::kMemcpy: return "gpu_memcpy";
    case NodeKind::kMemset: return "gpu_memset";
    case NodeKind::kCpuGap: return "cpu_gap";
    default: break;
  }
  const auto& t = ranks[g.rank[n]];
  switch (t.events[g.event[n]].kind) {
    case trace::EventKind::kUserAnnotation: return "user_annotation";
    case trace::EventKind::kPythonFunction: return "python_function";
    case trace::EventKind::kRuntime: return "cuda_runtime";
    case trace::EventKind::kDriver: return "cuda_driver";
    case trace::EventKind::kOtherCpu: return "cpu_other";
    default: return "cpu_op";
  }
}

std::vector<std::string> device_warnings(const std::vector<trace::RankTrace>& ranks, const std::string& profile_name) {
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
  for (const trace::RankTrace& t : ranks) {
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

Result<std::vector<std::string>> device_warnings_part(const WorkloadPart& w, const std::string& profile_name,
                                                      dist::Comm& comm) {
  constexpr int kTagDeviceWarning = 33;
  const std::vector<std::string> mine = device_warnings(w.ranks, profile_name);
  auto all = dist::all_gather(comm, kTagDeviceWarning, mine.empty() ? std::string() : mine.front());
  if (!all) return make_error("", "the traces' GPU models: " + all.error().message());
  std::vector<std::string> out;
  if (!comm.is_root()) return out;
  for (const std::string& text : *all) {
    if (text.empty()) continue;
    out.push_back(text);
    break;
  }
  return out;
}

}  // namespace emo::analysis
