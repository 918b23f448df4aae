// The independent executor: each rank's step run as a program in a
// discrete-event simulation. CPU threads are processes ordered by a time-ordered
// event queue; each runs its runtime calls in recorded order with the CPU time
// between them kept as work. Launches put GPU ops into their stream's queue
// (in the order the stream ran them), and an op starts once it was launched,
// the op before it on the stream ended, the ops its stream waits for (events)
// ended and, for a collective, every participant arrived. Blocking calls end
// after the GPU work they wait on. Which op a sync or an event captures is
// decided when the call executes (the ops launched by then), not from the
// trace's dependency structure. See docs/replay.md, "An independent executor".
#include "emo/executor/executor.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>

namespace emo::executor {
namespace {

using trace::Event;
using trace::EventKind;
using trace::RankTrace;
using trace::SyncKind;

constexpr int64_t kUnset = std::numeric_limits<int64_t>::min();
constexpr int64_t kTolNs = 2000;  // CPU/GPU clock noise in one trace
constexpr int kNotCaptured = -2;   // an event record that has not run

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool icontains(std::string_view s, std::string_view word) {
  if (word.empty()) return true;
  if (s.size() < word.size()) return false;
  for (size_t i = 0; i + word.size() <= s.size(); ++i) {
    size_t k = 0;
    while (k < word.size() && lower(s[i + k]) == word[k]) ++k;
    if (k == word.size()) return true;
  }
  return false;
}

bool istarts(std::string_view s, std::string_view word) {
  if (s.size() < word.size()) return false;
  for (size_t k = 0; k < word.size(); ++k) {
    if (lower(s[k]) != word[k]) return false;
  }
  return true;
}

int64_t median_of(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

int64_t scaled(int64_t ns, double f) {
  if (f == 1.0) return ns;
  return static_cast<int64_t>(std::llround(static_cast<double>(ns) * f));
}

enum class CallKind : uint8_t { kPlain, kDeviceSync, kStreamSync, kEventSync, kEventRecord, kStreamWait };

struct Op {
  uint32_t rank = 0;
  uint32_t event = 0;
  int stream = -1;     // index into streams
  uint32_t pos = 0;    // position in its stream
  int64_t ms = 0, me = 0;  // measured start / end, job clock
  int64_t dur = 0;         // executed duration (scaled)
  double factor = 1.0;
  int call = -1;           // launching call
  int64_t launch_ms = kUnset;  // measured start of the launching call
  bool fixed = false;      // starts no earlier than its measured start, tied to no call
  bool after_wait = false;  // the first op its thread launched after a stream wait
  bool queued = false;      // waited on an earlier step's queued work (find_queued_ops)
  bool launched = false;
  int64_t launch_t = 0;    // executed start of the launching call
  int coll = -1;           // matched collective group
  int64_t transfer = 0;    // matched collective: executed transfer time
  std::vector<int> waits;       // ops of other streams this op waits for (events)
  std::vector<int> dependents;  // ops waiting for this one through events
  std::vector<int> waiters;     // threads blocked on this op
  int64_t start = kUnset, end = kUnset;
};

struct Stream {
  uint32_t rank = 0;
  int32_t device = -1, stream = -1;
  // The stream id as the trace gives it (the op's, else its lane's; -1 when neither has one, which the reader
  // never leaves, but a RankTrace built in code may), where `stream` falls back on the lane's tid: what
  // RankTrace::prior_gpu_busy is keyed by, as the graph reads it.
  int32_t trace_stream = -1;
  std::vector<int> ops;               // in the order the stream ran them
  std::vector<int64_t> launch_sufmin;  // suffix minimum of the ops' measured launch times
  int last_launched = -1;             // executed: highest position launched so far
  std::vector<int> pending_waits;     // event waits for the next op launched on this stream
  std::vector<int64_t> end_prefmax;   // prefix maximum of the ops' measured ends
  // Measured: last position whose launch started at or before t; -1 if none.
  int last_launched_before(int64_t t) const {
    auto it = std::upper_bound(launch_sufmin.begin(), launch_sufmin.end(), t);
    return static_cast<int>(it - launch_sufmin.begin()) - 1;
  }
};

struct Call {
  uint32_t rank = 0;
  int thread = -1;
  std::string_view name;
  int64_t ms = 0, me = 0;
  std::vector<int64_t> corrs;  // its own correlation and those of calls nested in it
  std::vector<int> ops;        // GPU ops it launched
  CallKind kind = CallKind::kPlain;
  int sync_stream = -1;        // stream sync / event sync fallback: the stream waited on
  int64_t record_corr = trace::kNone;  // event sync / stream wait from a cuda_sync record
  int record_stream = -1;      // the recording stream (cuda_sync record)
  int wait_stream = -1;        // stream wait: the waiting stream (cuda_sync record)
  int static_src = -1;         // stream wait: source op when no record explains it
  bool memcpy_blocking = false;  // waited for its own copies in the trace
  int record_stream_of = -1;   // event record: the recording stream named by a cuda_sync record
  std::vector<int> capture_slots;  // event record: the slots of its correlations
  int capture_slot = -1;       // stream wait / event sync: the slot of record_corr (-1: no record call)
};

// A cross-thread constraint on a thread's next call (or, past its last call, its end): no earlier than
// thread `src`'s call `src_call` (a position in its calls; -1: its measured begin) ended, plus `after`.
struct Gate {
  int src = -1;
  int src_call = -1;
  int64_t after = 0;
};

struct Thread {
  uint32_t rank = 0;
  uint32_t lane = 0;
  std::vector<int> calls;
  std::vector<int64_t> pre;  // CPU work before each call
  int64_t begin = 0, end_meas = 0, tail = 0;
  // Per call position (and one past the last: the thread's end), the gates from other threads' work
  // (collect_flows); empty where no flow reaches the thread.
  std::vector<std::vector<Gate>> gates;
  // Woken by another thread (its first call is gated): its measured begin is no anchor; it begins at
  // `wake_gate` plus the measured wake-up `wake_ns`.
  bool woken = false;
  Gate wake_gate;
  int64_t wake_ns = 0;
  // In the step's span. A thread that recorded Python frames alone (no operator, no annotation, no
  // runtime call) and exchanges no flow with another (a progress-bar monitor, a queue thread) can delay
  // neither the GPU nor another thread: its work is executed but does not hold the step open
  // (mark_isolated_threads).
  bool in_span = true;
  bool python_only = true;
  // executed state
  size_t next = 0;
  int64_t begin_exec = 0;  // its measured begin, or where it was woken
  int64_t end = kUnset;
  int last_launch_stream = -1;
  bool has_record = false;
  int last_record_op = -1;
  std::vector<int> pending_waits;  // event waits for the thread's next launched op
  int blocked_call = -1;
  int64_t blocked_at = 0;
  std::vector<int> blocked_on;
  int64_t gated_at = kUnset;        // its own time for the next call while a gate's source has not run
  std::vector<int> gate_waiters;    // threads whose gate waits for this thread's next call to end
};

struct Group {
  std::vector<int> members;
  int arrived = 0;
  int64_t last_arrival = kUnset;
};

struct RankInfo {
  int64_t base = 0;  // local trace time + base = job clock
  int64_t tau_launch = 0, tau_gap = 0, tau_wake = 0;
  int64_t slow_launch = 0;  // a launching call at least this long is host time its ops wait for
  std::unordered_map<int64_t, std::vector<int>> ops_by_corr;
  std::unordered_map<int64_t, int> capture_slot;    // cudaEventRecord correlation -> its slot in captured_
  std::unordered_map<int64_t, int> record_stream_of;  // record correlation -> recording stream (cuda_sync)
};

class Executor {
 public:
  Executor(const std::vector<RankTrace>& ranks, const Scenario& s) : ranks_(ranks), sc_(s) {}

  Result<Execution> run() {
    EMO_RETURN_IF_ERROR(build());
    EMO_RETURN_IF_ERROR(simulate(nullptr));
    return report();
  }

  // The program, from the traces: everything but the simulation.
  Status build() {
    if (ranks_.empty()) return make_error("", "no trace given");
    info_.resize(ranks_.size());
    collect_ops();
    index_by_rank(streams_, rank_streams_);
    align_clocks();
    collect_threads();
    index_by_rank(calls_, rank_calls_);
    collect_flows();
    mark_isolated_threads();
    scale_cpu_work();
    classify_calls();
    find_queued_ops();
    find_gpu_tail_loop();
    for (uint32_t r = 0; r < ranks_.size(); ++r) typical_latencies(r);
    match_collectives();
    apply_durations();
    if (threads_.empty() && ops_.empty()) {
      return make_error(ranks_[0].path, "the step has no CPU or GPU events to execute",
                        "check the step, or that the trace was recorded with CUDA activities on");
    }
    prepare_runs();
    return {};
  }

  // ---------- what Program shows ----------
  int64_t origin() const { return origin_; }
  int64_t base(uint32_t r) const { return info_[r].base; }
  size_t num_ops() const { return ops_.size(); }
  const Op& op_at(size_t i) const { return ops_[i]; }
  const std::vector<Group>& groups() const { return groups_; }
  const std::vector<Call>& all_calls() const { return calls_; }
  const std::vector<Thread>& all_threads() const { return threads_; }
  int64_t call_start_at(size_t c) const { return call_start_[c]; }
  int64_t call_end_at(size_t c) const { return call_end_[c]; }
  // The step's span as the loop runs it: where the step holds GPU ops queued behind an earlier step's
  // work (find_queued_ops), the longer of the host's span and the time from the first of them starting
  // to the end; where its GPU tail runs free into the next step's host time (find_gpu_tail_loop), the
  // longer of the host's span and each stream's span (graph::Graph::measured_span_ns); else from the
  // origin to the end.
  bool loops() const { return !queued_.empty() || tail_loop_; }
  int64_t executed_period() const { return period(false, executed_end() - origin_); }
  // The span as the loop runs it, measured (the trace's times) or executed, given the span from the
  // step's begin to its end (above).
  int64_t period(bool measured, int64_t span) const {
    if (!loops()) return span;
    int64_t h0 = std::numeric_limits<int64_t>::max(), h1 = std::numeric_limits<int64_t>::min();
    for (const Thread& x : threads_) {
      if (!x.in_span || (measured ? x.end_meas : x.end) == kUnset) continue;
      h0 = std::min(h0, measured ? x.begin : x.begin_exec);
      h1 = std::max(h1, measured ? x.end_meas : x.end);
    }
    const int64_t host = h1 > h0 ? h1 - h0 : 0;
    if (tail_loop_) {
      int64_t longest = host;
      for (const Stream& st : streams_) {
        if (st.ops.empty()) continue;
        int64_t s0 = std::numeric_limits<int64_t>::max(), s1 = std::numeric_limits<int64_t>::min();
        for (int i : st.ops) {
          s0 = std::min(s0, measured ? op(i).ms : op(i).start);
          s1 = std::max(s1, measured ? op(i).me : op(i).end);
        }
        longest = std::max(longest, s1 - s0);
      }
      return longest;
    }
    int64_t anchor = std::numeric_limits<int64_t>::max(), end = std::numeric_limits<int64_t>::min();
    for (int i : queued_) {
      const Op& o = ops_[static_cast<size_t>(i)];
      anchor = std::min(anchor, measured ? o.ms : o.start);
    }
    for (const Op& o : ops_) end = std::max(end, measured ? o.me : o.end);
    end = std::max(end, h1);
    return std::max(host, end - anchor);
  }
  int64_t executed_end() const {
    int64_t e = origin_;
    for (const Thread& x : threads_) {
      if (x.in_span) e = std::max(e, x.end);
    }
    for (const Op& o : ops_) e = std::max(e, o.end);
    return e;
  }

 private:
  // ---------- the program, from the trace ----------
  // As graph::Graph::queued_ops: GPU ops that started kQueuedWaitMinNs or more after the later of their
  // launch call's start and their stream's op before's end (event waits are resolved only as the program
  // runs) on work launched before the step (trace::waited_on_prior_work: their stream's, ending as they
  // start or running 90 % of that time): queued behind an earlier step's work. Their wait is no typical
  // launch latency.
  void find_queued_ops() {
    for (size_t i = 0; i < ops_.size(); ++i) {
      Op& o = ops_[i];
      const Stream& st = stream(o.stream);
      int64_t from = o.call >= 0 ? calls_[static_cast<size_t>(o.call)].ms : kUnset;
      if (o.pos > 0) from = std::max(from, op(st.ops[o.pos - 1]).me);
      if (from == kUnset) continue;
      const int64_t base = info_[o.rank].base;
      const auto& busy = ranks_[o.rank].prior_gpu_busy;
      if (!trace::waited_on_prior_work(busy, st.device, st.trace_stream, from - base, o.ms - base)) continue;
      o.queued = true;
      queued_.push_back(static_cast<int>(i));
    }
  }

  // As graph::Graph::gpu_tail_loop: every rank with GPU ops passes trace::runs_free_gpu_tail on its
  // threads' measured span and its ops' measured end, and no op is queued (find_queued_ops).
  void find_gpu_tail_loop() {
    if (!queued_.empty()) return;
    constexpr int64_t kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();
    std::vector<int64_t> h0(ranks_.size(), kMax), h1(ranks_.size(), kMin), gpu_end(ranks_.size(), kMin);
    for (const Thread& x : threads_) {
      if (!x.in_span) continue;
      h0[x.rank] = std::min(h0[x.rank], x.begin);
      h1[x.rank] = std::max(h1[x.rank], x.end_meas);
    }
    for (const Op& o : ops_) gpu_end[o.rank] = std::max(gpu_end[o.rank], o.me);
    bool any = false;
    for (uint32_t r = 0; r < ranks_.size(); ++r) {
      if (gpu_end[r] == kMin) continue;
      if (h0[r] == kMax) return;
      const int64_t base = info_[r].base;
      if (!trace::runs_free_gpu_tail(ranks_[r], h0[r] - base, h1[r] - base, gpu_end[r] - base)) return;
      any = true;
    }
    tail_loop_ = any;
  }

  void collect_ops() {
    std::map<std::tuple<uint32_t, int32_t, int32_t>, int> stream_of;
    for (uint32_t r = 0; r < ranks_.size(); ++r) {
      const RankTrace& t = ranks_[r];
      for (uint32_t i = 0; i < t.events.size(); ++i) {
        const Event& e = t.events[i];
        if (!trace::is_gpu_op(e.kind) || e.lane >= t.lanes.size()) continue;
        const trace::Lane& ln = t.lanes[e.lane];
        int32_t dev = e.device >= 0 ? e.device : ln.device;
        const int32_t traced = e.stream >= 0 ? e.stream : ln.stream;
        int32_t st = traced >= 0 ? traced : static_cast<int32_t>(ln.tid);
        auto key = std::make_tuple(r, dev, st);
        auto it = stream_of.find(key);
        if (it == stream_of.end()) {
          it = stream_of.emplace(key, static_cast<int>(streams_.size())).first;
          Stream s;
          s.rank = r;
          s.device = dev;
          s.stream = st;
          s.trace_stream = traced;
          streams_.push_back(s);
        }
        Op op;
        op.rank = r;
        op.event = i;
        op.stream = it->second;
        op.ms = e.ts_ns;
        op.me = e.ts_ns + e.dur_ns;
        auto id = static_cast<int>(ops_.size());
        ops_.push_back(op);
        if (e.correlation != trace::kNone) info_[r].ops_by_corr[e.correlation].push_back(id);
      }
    }
    // Stream order: as the stream ran them (measured start, then event order).
    for (int i = 0; i < static_cast<int>(ops_.size()); ++i) streams_[static_cast<size_t>(ops_[static_cast<size_t>(i)].stream)].ops.push_back(i);
    for (auto& s : streams_) {
      std::stable_sort(s.ops.begin(), s.ops.end(), [&](int a, int b) { return op(a).ms < op(b).ms; });
      for (size_t p = 0; p < s.ops.size(); ++p) op(s.ops[p]).pos = static_cast<uint32_t>(p);
    }
  }

  Op& op(int i) { return ops_[static_cast<size_t>(i)]; }
  const Op& op(int i) const { return ops_[static_cast<size_t>(i)]; }
  Stream& stream(int i) { return streams_[static_cast<size_t>(i)]; }
  const Stream& stream(int i) const { return streams_[static_cast<size_t>(i)]; }
  Call& call(int i) { return calls_[static_cast<size_t>(i)]; }
  Thread& thread(int i) { return threads_[static_cast<size_t>(i)]; }

  bool is_collective_op(const Op& o) const {
    const Event& e = ranks_[o.rank].events[o.event];
    return e.kind == EventKind::kKernel && e.collective != trace::kNoIndex;
  }

  // Collective kernels of a rank by their matching key: (process group, Seq),
  // else (process group, collective, k-th occurrence on the rank).
  std::map<std::string, std::vector<int>> collective_keys() const {
    std::map<std::string, std::vector<int>> groups;
    std::vector<std::vector<int>> by_rank(ranks_.size());  // each rank's collective ops, in index order
    for (int i = 0; i < static_cast<int>(ops_.size()); ++i) {
      if (is_collective_op(op(i))) by_rank[op(i).rank].push_back(i);
    }
    for (uint32_t r = 0; r < ranks_.size(); ++r) {
      const RankTrace& t = ranks_[r];
      std::map<std::string, int64_t> occurrence;
      std::vector<int>& mine = by_rank[r];
      std::stable_sort(mine.begin(), mine.end(), [&](int a, int b) { return op(a).ms < op(b).ms; });
      for (int i : mine) {
        const Event& e = t.events[op(i).event];
        if (e.collective >= t.collectives.size()) continue;
        const trace::CollectiveArgs& ca = t.collectives[e.collective];
        std::string pg(t.strings.view(ca.process_group));
        std::string key;
        if (ca.seq != trace::kNone) {
          key = pg + '\x1f' + "seq" + '\x1f' + std::to_string(ca.seq);
        } else {
          std::string coll(t.strings.view(ca.collective));
          key = pg + '\x1f' + coll + '\x1f' + std::to_string(occurrence[pg + '\x1f' + coll]++);
        }
        groups[key].push_back(i);
      }
    }
    return groups;
  }

  // One clock for all ranks: shared origin, then each rank shifted so that its
  // collectives end with rank 0's (median difference); a rank sharing none with
  // rank 0 starts with it.
  void align_clocks() {
    int64_t min_origin = std::numeric_limits<int64_t>::max();
    for (const auto& t : ranks_) min_origin = std::min(min_origin, t.origin_ns);
    for (uint32_t r = 0; r < ranks_.size(); ++r) info_[r].base = ranks_[r].origin_ns - min_origin;
    if (ranks_.size() > 1) {
      std::vector<std::vector<int64_t>> diffs(ranks_.size());
      for (const auto& [key, members] : collective_keys()) {
        int ref = -1;
        for (int m : members) {
          if (op(m).rank == 0 && ref < 0) ref = m;
        }
        if (ref < 0) continue;
        std::vector<bool> seen(ranks_.size(), false);
        for (int m : members) {
          uint32_t r = op(m).rank;
          if (r == 0 || seen[r]) continue;
          seen[r] = true;
          diffs[r].push_back((op(m).me + info_[r].base) - (op(ref).me + info_[0].base));
        }
      }
      std::vector<int64_t> first(ranks_.size(), std::numeric_limits<int64_t>::max());
      for (uint32_t r = 0; r < ranks_.size(); ++r) {
        for (const Event& e : ranks_[r].events) {
          if (counts_for_span(r, e)) first[r] = std::min(first[r], e.ts_ns + info_[r].base);
        }
      }
      for (uint32_t r = 1; r < ranks_.size(); ++r) {
        if (!diffs[r].empty()) {
          info_[r].base -= median_of(diffs[r]);
        } else if (first[r] != std::numeric_limits<int64_t>::max() &&
                   first[0] != std::numeric_limits<int64_t>::max()) {
          info_[r].base -= first[r] - first[0];
        }
      }
    }
    for (Op& o : ops_) {
      o.ms += info_[o.rank].base;
      o.me += info_[o.rank].base;
    }
  }

  bool counts_for_span(uint32_t r, const Event& e) const {
    const RankTrace& t = ranks_[r];
    if (e.lane >= t.lanes.size()) return false;
    if (trace::is_gpu_op(e.kind)) return true;
    return trace::is_cpu_side(e.kind) && !t.lanes[e.lane].gpu;
  }

  // Each CPU thread: its runtime/driver calls in recorded order (a call nested
  // in another folds into it), the CPU work before each, and the tail after the last.
  void collect_threads() {
    for (uint32_t r = 0; r < ranks_.size(); ++r) {
      const RankTrace& t = ranks_[r];
      const int64_t base = info_[r].base;
      std::vector<std::vector<uint32_t>> by_lane(t.lanes.size());
      for (uint32_t i = 0; i < t.events.size(); ++i) {
        const Event& e = t.events[i];
        if (e.lane < t.lanes.size() && trace::is_cpu_side(e.kind) && !t.lanes[e.lane].gpu) by_lane[e.lane].push_back(i);
      }
      for (auto& evs : by_lane) {
        if (evs.empty()) continue;
        Thread th;
        th.rank = r;
        th.lane = t.events[evs.front()].lane;
        th.begin = std::numeric_limits<int64_t>::max();
        th.end_meas = std::numeric_limits<int64_t>::min();
        const int tid = static_cast<int>(threads_.size());
        int cur = -1;
        for (uint32_t i : evs) {
          const Event& e = t.events[i];
          const int64_t s = e.ts_ns + base, end = e.ts_ns + e.dur_ns + base;
          th.begin = std::min(th.begin, s);
          th.end_meas = std::max(th.end_meas, end);
          th.python_only = th.python_only && e.kind == EventKind::kPythonFunction;
          if (e.kind != EventKind::kRuntime && e.kind != EventKind::kDriver) continue;
          ++stats_.runtime_calls;
          if (cur >= 0 && s < call(cur).me) {  // inside (or overlapping) the call before: part of it
            call(cur).me = std::max(call(cur).me, end);
            if (e.correlation != trace::kNone) call(cur).corrs.push_back(e.correlation);
            continue;
          }
          Call c;
          c.rank = r;
          c.thread = tid;
          c.name = t.strings.view(e.name);
          c.ms = s;
          c.me = end;
          if (e.correlation != trace::kNone) c.corrs.push_back(e.correlation);
          cur = static_cast<int>(calls_.size());
          calls_.push_back(std::move(c));
          th.calls.push_back(cur);
        }
        int64_t prev_end = th.begin;
        for (int ci : th.calls) {
          th.pre.push_back(std::max<int64_t>(0, call(ci).ms - prev_end));
          prev_end = std::max(prev_end, call(ci).me);
        }
        th.tail = std::max<int64_t>(0, th.end_meas - prev_end);
        threads_.push_back(std::move(th));
      }
    }
    stats_.threads = static_cast<int64_t>(threads_.size());
    // Launches: every op whose correlation names a call of its rank.
    std::vector<std::unordered_map<int64_t, int>> call_by_corr(ranks_.size());
    for (int ci = 0; ci < static_cast<int>(calls_.size()); ++ci) {
      for (int64_t c : call(ci).corrs) call_by_corr[call(ci).rank].emplace(c, ci);
    }
    for (int i = 0; i < static_cast<int>(ops_.size()); ++i) {
      Op& o = op(i);
      const Event& e = ranks_[o.rank].events[o.event];
      auto it = e.correlation == trace::kNone ? call_by_corr[o.rank].end() : call_by_corr[o.rank].find(e.correlation);
      if (it == call_by_corr[o.rank].end()) {
        o.fixed = true;
        ++stats_.gpu_ops_without_launch;
        continue;
      }
      o.call = it->second;
      o.launch_ms = call(it->second).ms;
      call(it->second).ops.push_back(i);
      if (o.ms < o.launch_ms - kTolNs) {  // the trace contradicts the launch
        o.fixed = true;
        ++stats_.launch_contradicted;
      }
    }
    for (auto& s : streams_) {
      s.launch_sufmin.resize(s.ops.size());
      int64_t m = std::numeric_limits<int64_t>::max();
      for (size_t p = s.ops.size(); p-- > 0;) {
        const Op& o = op(s.ops[p]);
        m = std::min(m, o.launch_ms != kUnset ? o.launch_ms : o.ms);
        s.launch_sufmin[p] = m;
      }
    }
  }

  // Kineto's fwdbwd flows: an op on one thread (forward) and the op the autograd engine ran for it on
  // another (backward). The executor's own reading of them, on its threads and calls:
  //  - the backward thread cannot be at the backward op's start before the forward thread is at the
  //    forward op's end: its next call after that point waits for it, plus its own work in between;
  //  - a backward thread that has its first call after such a point is woken by the forward thread: it
  //    begins no earlier than the latest forward op's end of those points plus the measured wake-up
  //    (its first event less that end), not where it was recorded;
  //  - a forward thread that recorded nothing while the backward run went on (no event starting
  //    between the backward op's start and the end of that thread's last event before the forward
  //    thread's next call) waited for it: that next call waits for the backward thread's last call
  //    before it, plus the measured time between them (both threads' work).
  // A flow whose backward op starts before its forward op ends is left out.
  void collect_flows() {
    for (uint32_t r = 0; r < ranks_.size(); ++r) {
      const RankTrace& t = ranks_[r];
      std::unordered_map<uint32_t, std::pair<int64_t, int64_t>> ends;  // flow -> (forward event, backward event)
      for (uint32_t i = 0; i < t.events.size(); ++i) {
        const Event& e = t.events[i];
        if (e.flow_out != 0) ends.try_emplace(e.flow_out, -1, -1).first->second.first = i;
        if (e.flow_in != 0) ends.try_emplace(e.flow_in, -1, -1).first->second.second = i;
      }
      std::unordered_map<uint32_t, int> thread_of;  // lane -> thread
      for (int th = 0; th < static_cast<int>(threads_.size()); ++th) {
        if (threads_[static_cast<size_t>(th)].rank == r) thread_of.emplace(threads_[static_cast<size_t>(th)].lane, th);
      }
      // Each thread's events (start, end) by start, for "recorded nothing while".
      std::unordered_map<int, std::vector<std::pair<int64_t, int64_t>>> spans;
      const int64_t base = info_[r].base;
      for (const Event& e : t.events) {
        if (e.lane >= t.lanes.size() || !trace::is_cpu_side(e.kind) || t.lanes[e.lane].gpu) continue;
        auto it = thread_of.find(e.lane);
        if (it != thread_of.end()) spans[it->second].emplace_back(e.ts_ns + base, e.ts_ns + e.dur_ns + base);
      }
      for (auto& [th, v] : spans) std::sort(v.begin(), v.end());
      // The links: (forward thread, backward thread, forward end, backward start), from the flows, else
      // from the engine's frames (engine_links).
      std::vector<std::tuple<int, int, int64_t, int64_t>> links;
      std::vector<std::pair<uint32_t, std::pair<int64_t, int64_t>>> flows(ends.begin(), ends.end());
      std::sort(flows.begin(), flows.end());  // by flow number: the same gates in every run
      for (const auto& [id, fb] : flows) {
        if (fb.first < 0 || fb.second < 0) continue;
        const Event& f = t.events[static_cast<size_t>(fb.first)];
        const Event& b = t.events[static_cast<size_t>(fb.second)];
        auto ia = thread_of.find(f.lane), ib = thread_of.find(b.lane);
        if (ia == thread_of.end() || ib == thread_of.end() || ia->second == ib->second) continue;
        links.emplace_back(ia->second, ib->second, f.ts_ns + f.dur_ns + base, b.ts_ns + base);
      }
      if (flows.empty()) engine_links(r, thread_of, spans, links);
      // (forward thread, its next call, backward thread) -> the earliest backward op start in that gap.
      std::map<std::tuple<int, size_t, int>, int64_t> waits;
      for (const auto& [a, bt, ta, tb] : links) {
        Thread& A = thread(a);
        Thread& B = thread(bt);
        if (tb < ta) continue;  // (gates then only point back in measured time: no circle of waits)
        ++stats_.thread_flows;
        // The forward op's end on its thread: after call `ka` (the last that ended by then), or its begin.
        const int ka = last_call_ended_by(A, ta);
        const int64_t anchor_meas = ka >= 0 ? call(A.calls[static_cast<size_t>(ka)]).me : A.begin;
        const int64_t to_fwd_end = scaled(std::max<int64_t>(0, ta - anchor_meas), sc_.cpu_factor);
        // The backward op's start on its thread: before call `kb` (the first that starts at or after it).
        const size_t kb = first_call_from(B, tb);
        const int64_t next_meas = kb < B.calls.size() ? call(B.calls[kb]).ms : B.end_meas;
        B.gates.resize(B.calls.size() + 1);
        B.gates[kb].push_back(Gate{a, ka, to_fwd_end + scaled(std::max<int64_t>(0, next_meas - tb), sc_.cpu_factor)});
        if (kb == 0 && B.begin <= tb) {
          // Woken: by the latest forward end before its first event (the least wake-up).
          const int64_t wake = std::max<int64_t>(0, B.begin - ta);
          if (!B.woken || wake < B.wake_ns) {
            B.woken = true;
            B.wake_ns = wake;
            B.wake_gate = Gate{a, ka, to_fwd_end};
          }
        }
        // The forward thread's wait: its gap holding the backward op's start (decided below, once the
        // earliest such start in the gap is known).
        const size_t na = first_call_from(A, tb + 1);
        const int64_t gap_from = na > 0 ? call(A.calls[na - 1]).me : A.begin;
        if (gap_from > tb) continue;
        auto [w, fresh] = waits.try_emplace(std::tuple{a, na, bt}, tb);
        if (!fresh) w->second = std::min(w->second, tb);
      }
      // Each gap of a forward thread that holds backward op starts: from the earliest of them to the
      // forward thread's next call, the backward thread ran (its events starting in that window) and the
      // forward thread recorded nothing (no event of its own starting before that run ended).
      for (const auto& [key, tb] : waits) {
        const auto [a, na, bt] = key;
        Thread& A = thread(a);
        const Thread& B = thread(bt);
        const int64_t resume = na < A.calls.size() ? call(A.calls[na]).ms : A.end_meas;
        const int jb = last_call_ended_by(B, resume);
        if (jb < 0 || call(B.calls[static_cast<size_t>(jb)]).ms < tb) continue;
        int64_t run_end = tb;
        for (const auto& [s0, e0] : spans[bt]) {
          if (s0 >= tb && s0 < resume) run_end = std::max(run_end, e0);
        }
        const auto& sa = spans[a];
        auto it = std::upper_bound(sa.begin(), sa.end(), std::pair<int64_t, int64_t>{tb, std::numeric_limits<int64_t>::max()});
        if (it != sa.end() && it->first < run_end) continue;
        A.gates.resize(A.calls.size() + 1);
        A.gates[na].push_back(
            Gate{bt, jb, scaled(std::max<int64_t>(0, resume - call(B.calls[static_cast<size_t>(jb)]).me), sc_.cpu_factor)});
        ++stats_.thread_waits;
      }
    }
  }

  // Backward on the autograd engine's thread without fwdbwd flows (an older PyTorch, or a trace recorded
  // without them): the engine's thread is the one with the most engine-frame events (trace::
  // is_autograd_engine_frame: `autograd::engine::evaluate_function`, or an older PyTorch's backward
  // functions), and any with at least half as many. A run of its events that starts and ends while a thread
  // with runtime calls recorded nothing (between two of its event starts) was that thread's backward():
  // a link from where that thread last did something to the run's first event.
  void engine_links(uint32_t r, const std::unordered_map<uint32_t, int>& thread_of,
                    std::unordered_map<int, std::vector<std::pair<int64_t, int64_t>>>& spans,
                    std::vector<std::tuple<int, int, int64_t, int64_t>>& links) {
    const RankTrace& t = ranks_[r];
    std::unordered_map<int, int64_t> frames;
    std::vector<int8_t> engine_name(t.strings.size(), -1);
    for (const Event& e : t.events) {
      if (e.lane >= t.lanes.size() || !trace::is_cpu_side(e.kind) || e.name >= engine_name.size()) continue;
      int8_t& k = engine_name[e.name];
      if (k < 0) k = trace::is_autograd_engine_frame(t.strings.view(e.name)) ? 1 : 0;
      if (k == 0) continue;
      auto it = thread_of.find(e.lane);
      if (it != thread_of.end()) ++frames[it->second];
    }
    int64_t most = 0;
    for (const auto& [th, n] : frames) most = std::max(most, n);
    if (most == 0) return;
    std::vector<int> threads;  // the rank's, in index order: the same links in every run
    for (const auto& [lane, th] : thread_of) threads.push_back(th);
    std::sort(threads.begin(), threads.end());
    for (int bt : threads) {
      const auto fb = frames.find(bt);
      if (fb == frames.end() || 2 * fb->second < most) continue;
      const auto& sb = spans[bt];
      for (int a : threads) {
        if (a == bt || thread(a).calls.empty()) continue;
        const auto fa = frames.find(a);
        if (fa != frames.end() && 2 * fa->second >= most) continue;  // another engine thread
        const auto& sa = spans[a];
        if (sa.empty()) continue;
        std::vector<int64_t> a_ends;
        for (const auto& [s0, e0] : sa) a_ends.push_back(e0);
        std::sort(a_ends.begin(), a_ends.end());
        // B's events by the window of `a` (between two of its event starts) they fall in whole.
        size_t window = std::numeric_limits<size_t>::max();
        for (const auto& [s0, e0] : sb) {
          auto it = std::upper_bound(sa.begin(), sa.end(), std::pair<int64_t, int64_t>{s0, std::numeric_limits<int64_t>::max()});
          if (it == sa.begin()) continue;
          const size_t w = static_cast<size_t>(it - sa.begin()) - 1;
          const int64_t close = it != sa.end() ? it->first : thread(a).end_meas;
          if (e0 > close) continue;
          if (w == window) continue;  // the same run
          window = w;
          // Where `a` last did something before the run: its last event start or end by then.
          int64_t ta = sa[w].first;
          auto ie = std::upper_bound(a_ends.begin(), a_ends.end(), s0);
          if (ie != a_ends.begin()) ta = std::max(ta, *std::prev(ie));
          links.emplace_back(a, bt, ta, s0);
          ++stats_.thread_links_inferred;
        }
      }
    }
  }

  // The position of the thread's last call that ended by `t`; -1: none.
  // A thread's calls do not overlap (nested ones are folded in), so their ends are in order too.
  int last_call_ended_by(const Thread& x, int64_t t) const {
    auto it = std::upper_bound(x.calls.begin(), x.calls.end(), t,
                               [&](int64_t v, int c) { return v < calls_[static_cast<size_t>(c)].me; });
    return static_cast<int>(it - x.calls.begin()) - 1;
  }
  // The position of the thread's first call that starts at or after `t`; calls.size(): none.
  size_t first_call_from(const Thread& x, int64_t t) const {
    auto it = std::lower_bound(x.calls.begin(), x.calls.end(), t,
                               [&](int c, int64_t v) { return calls_[static_cast<size_t>(c)].ms < v; });
    return static_cast<size_t>(it - x.calls.begin());
  }

  void mark_isolated_threads() {
    std::vector<char> linked(threads_.size(), 0);
    for (size_t i = 0; i < threads_.size(); ++i) {
      const Thread& x = threads_[i];
      if (!x.calls.empty() || x.woken || !x.python_only) linked[i] = 1;
      for (const auto& gs : x.gates) {
        for (const Gate& g : gs) linked[i] = linked[static_cast<size_t>(g.src)] = 1;
      }
      if (x.woken) linked[static_cast<size_t>(x.wake_gate.src)] = 1;
    }
    // A step of Python frames alone is theirs.
    const bool any = !ops_.empty() || std::find(linked.begin(), linked.end(), 1) != linked.end();
    for (size_t i = 0; i < threads_.size(); ++i) {
      threads_[i].in_span = !any || linked[i] != 0;
      stats_.threads_outside_span += threads_[i].in_span ? 0 : 1;
    }
  }

  // The scenario's factor on every thread's own CPU work (the calls' own time: when they end).
  void scale_cpu_work() {
    if (sc_.cpu_factor == 1.0) return;
    for (Thread& x : threads_) {
      for (int64_t& p : x.pre) p = scaled(p, sc_.cpu_factor);
      x.tail = scaled(x.tail, sc_.cpu_factor);
    }
  }

  // The latencies a launch, a queue and a wake-up inherently have on this rank:
  // medians over the ops (calls) where the trace shows them alone.
  void typical_latencies(uint32_t r) {
    std::vector<int64_t> lat, gap, wake;
    for (int si : rank_streams_[r]) {
      const Stream& s = stream(si);
      for (size_t p = 0; p < s.ops.size(); ++p) {
        const Op& o = op(s.ops[p]);
        // A wait for an earlier step's queued work is no launch latency (as the graph's medians).
        if (o.fixed || o.call < 0 || o.after_wait || o.queued) continue;
        if (p == 0 || op(s.ops[p - 1]).me <= o.launch_ms) lat.push_back(std::max<int64_t>(0, o.ms - o.launch_ms));
      }
    }
    info_[r].tau_launch = median_of(lat);
    // How long this rank's launch calls take: one 10× that (and 50 µs or more) is a slow launch (try_start).
    std::vector<int64_t> call_dur;
    for (int ci : rank_calls_[r]) {
      const Call& c = calls_[static_cast<size_t>(ci)];
      if (!c.ops.empty()) call_dur.push_back(c.me - c.ms);
    }
    info_[r].slow_launch = std::max<int64_t>(50'000, 10 * median_of(call_dur));
    for (int si : rank_streams_[r]) {
      const Stream& s = stream(si);
      for (size_t p = 1; p < s.ops.size(); ++p) {
        const Op& o = op(s.ops[p]);
        const Op& prev = op(s.ops[p - 1]);
        if (o.fixed || o.call < 0) continue;
        if (prev.me > o.launch_ms + info_[r].tau_launch) gap.push_back(std::max<int64_t>(0, o.ms - prev.me));
      }
    }
    info_[r].tau_gap = median_of(gap);
    for (int ci : rank_calls_[r]) {
      const Call& c = calls_[static_cast<size_t>(ci)];
      bool sync_like = icontains(c.name, "synchronize") || icontains(c.name, "memcpy");
      if (!sync_like) continue;
      int64_t waited = kUnset;
      for (int si : rank_streams_[r]) {
        const Stream& s = stream(si);
        int p = s.last_launched_before(c.ms);
        if (p < 0) continue;
        int64_t e = op(s.ops[static_cast<size_t>(p)]).me;
        if (e > c.ms && e <= c.me + kTolNs) waited = std::max(waited, e);
      }
      if (waited != kUnset) wake.push_back(std::max<int64_t>(0, c.me - waited));
    }
    info_[r].tau_wake = median_of(wake);
    stats_.launch_latency_ns.push_back(info_[r].tau_launch);
    stats_.queue_gap_ns.push_back(info_[r].tau_gap);
    stats_.wake_ns.push_back(info_[r].tau_wake);
  }

  template <class T>
  void index_by_rank(const std::vector<T>& items, std::vector<std::vector<int>>& out) const {
    out.assign(ranks_.size(), {});
    for (size_t i = 0; i < items.size(); ++i) out[items[i].rank].push_back(static_cast<int>(i));
  }

  int stream_index(uint32_t r, int32_t device, int32_t st) const {
    for (int i : rank_streams_[r]) {
      const Stream& s = stream(i);
      if (s.stream == st && (device < 0 || s.device == device)) return i;
    }
    return -1;
  }

  // The stream a sync without a record waited on: the one whose last op launched
  // before the call ended latest while the call was blocked; else the stream of
  // the thread's latest launch.
  int guess_sync_stream(const Call& c, int last_launch_stream) const {
    int best = -1;
    int64_t best_end = kUnset;
    for (int si : rank_streams_[c.rank]) {
      const Stream& s = stream(si);
      int p = s.last_launched_before(c.ms);
      if (p < 0) continue;
      int64_t e = op(s.ops[static_cast<size_t>(p)]).me;
      if (e > c.ms && e <= c.me + kTolNs && e > best_end) {
        best_end = e;
        best = si;
      }
    }
    return best >= 0 ? best : last_launch_stream;
  }

  void classify_calls() {
    // cuda_sync records by the correlation of their call.
    std::vector<std::unordered_map<int64_t, uint32_t>> sync_of(ranks_.size());
    for (uint32_t r = 0; r < ranks_.size(); ++r) {
      const RankTrace& t = ranks_[r];
      for (uint32_t i = 0; i < t.events.size(); ++i) {
        const Event& e = t.events[i];
        if (e.kind != EventKind::kCudaSync || e.correlation == trace::kNone) continue;
        sync_of[r].emplace(e.correlation, i);
        if ((e.sync == SyncKind::kStreamWaitEvent || e.sync == SyncKind::kEventSync) && e.wait_on_stream >= 0 &&
            e.wait_on_event_record_corr != trace::kNone) {
          int s = stream_index(r, e.device, e.wait_on_stream);
          if (s >= 0) info_[r].record_stream_of.emplace(e.wait_on_event_record_corr, s);
        }
      }
    }
    for (Thread& th : threads_) {
      int last_launch_stream = -1;
      bool has_record = false, waiting = false;
      for (size_t k = 0; k < th.calls.size(); ++k) {
        Call& c = call(th.calls[k]);
        const RankTrace& t = ranks_[c.rank];
        const Event* rec = nullptr;
        for (int64_t corr : c.corrs) {
          auto it = sync_of[c.rank].find(corr);
          if (it != sync_of[c.rank].end()) {
            rec = &t.events[it->second];
            break;
          }
        }
        if (rec) {
          switch (rec->sync) {
            case SyncKind::kContextSync: c.kind = CallKind::kDeviceSync; break;
            case SyncKind::kStreamSync:
              c.kind = CallKind::kStreamSync;
              c.sync_stream = stream_index(c.rank, rec->device, rec->stream);
              break;
            case SyncKind::kEventSync:
              c.kind = CallKind::kEventSync;
              c.record_corr = rec->wait_on_event_record_corr;
              c.record_stream = rec->wait_on_stream >= 0 ? stream_index(c.rank, rec->device, rec->wait_on_stream) : -1;
              c.sync_stream = c.record_stream;
              break;
            case SyncKind::kStreamWaitEvent:
              c.kind = CallKind::kStreamWait;
              c.record_corr = rec->wait_on_event_record_corr;
              c.record_stream = rec->wait_on_stream >= 0 ? stream_index(c.rank, rec->device, rec->wait_on_stream) : -1;
              c.wait_stream = stream_index(c.rank, rec->device, rec->stream);
              break;
            default: break;
          }
        }
        if (c.kind == CallKind::kPlain) {
          if (icontains(c.name, "devicesynchronize") || icontains(c.name, "ctxsynchronize")) {
            c.kind = CallKind::kDeviceSync;
          } else if (icontains(c.name, "streamsynchronize")) {
            c.kind = CallKind::kStreamSync;
          } else if (icontains(c.name, "eventsynchronize")) {
            c.kind = CallKind::kEventSync;
          } else if (icontains(c.name, "eventrecord")) {
            c.kind = CallKind::kEventRecord;
          } else if (icontains(c.name, "streamwaitevent")) {
            c.kind = CallKind::kStreamWait;
          }
        }
        if ((c.kind == CallKind::kStreamSync || c.kind == CallKind::kEventSync) && c.sync_stream < 0) {
          c.sync_stream = guess_sync_stream(c, last_launch_stream);
        }
        if (icontains(c.name, "memcpy")) {
          for (int o : c.ops) {
            if (op(o).ms >= c.ms - kTolNs && op(o).me <= c.me + kTolNs) c.memcpy_blocking = true;
          }
        }
        if (c.kind == CallKind::kEventRecord) has_record = true;
        if (c.kind == CallKind::kStreamWait && c.record_corr == trace::kNone && !has_record) {
          c.static_src = infer_wait_source(th, k);
          if (c.static_src >= 0) ++stats_.cross_stream_inferred;
        } else if (c.kind == CallKind::kStreamWait) {
          if (c.record_corr != trace::kNone) {
            ++stats_.cross_stream_from_records;
          } else {
            ++stats_.cross_stream_from_calls;
          }
        }
        if (c.kind == CallKind::kStreamWait && c.record_corr != trace::kNone) {
          // Where the record call is not in the step: the last op of the recording
          // stream launched before it (correlations grow in launch order).
          c.static_src = last_before_corr(c.record_stream, c.record_corr);
        }
        if (c.kind == CallKind::kStreamWait) waiting = true;
        if (!c.ops.empty()) {
          if (waiting) op(c.ops.front()).after_wait = true;
          waiting = false;
          last_launch_stream = op(c.ops.back()).stream;
        }
      }
    }
  }

  int last_before_corr(int s, int64_t corr) const {
    if (s < 0) return -1;
    const Stream& st = streams_[static_cast<size_t>(s)];
    for (size_t p = st.ops.size(); p-- > 0;) {
      const Event& e = ranks_[st.rank].events[op(st.ops[p]).event];
      if (e.correlation != trace::kNone && e.correlation < corr) return st.ops[p];
    }
    return -1;
  }

  // A stream wait with no record anywhere: the op of another stream, launched
  // before the wait, still running when the thread's next op was launched, that
  // ended last no later than that op started.
  int infer_wait_source(const Thread& th, size_t k) const {
    const Call& w = calls_[static_cast<size_t>(th.calls[k])];
    int dst = -1;
    for (size_t j = k + 1; j < th.calls.size() && dst < 0; ++j) {
      const Call& c = calls_[static_cast<size_t>(th.calls[j])];
      if (!c.ops.empty()) dst = c.ops.front();
    }
    if (dst < 0) return -1;
    const Op& d = op(dst);
    int best = -1;
    for (int si : rank_streams_[w.rank]) {
      const Stream& s = stream(si);
      if (si == d.stream) continue;
      int p = s.last_launched_before(w.ms);
      if (p < 0) continue;
      int cand = s.ops[static_cast<size_t>(p)];
      const Op& c = op(cand);
      if (c.me < d.launch_ms || c.me > d.ms + kTolNs) continue;
      if (best < 0 || c.me > op(best).me) best = cand;
    }
    return best;
  }

  void match_collectives() {
    for (auto& [key, members] : collective_keys()) {
      std::vector<int> m;
      std::vector<bool> seen(ranks_.size(), false);
      for (int i : members) {
        if (!seen[op(i).rank]) m.push_back(i);
        seen[op(i).rank] = true;
      }
      if (m.size() < 2) continue;
      int64_t last = kUnset, first_end = std::numeric_limits<int64_t>::max();
      for (int i : m) {
        last = std::max(last, op(i).ms);
        first_end = std::min(first_end, op(i).me);
      }
      if (first_end < last) continue;  // the ranks' clocks disagree beyond repair
      Group g;
      g.members = m;
      auto gi = static_cast<int>(groups_.size());
      for (int i : m) {
        op(i).coll = gi;
        op(i).transfer = op(i).me - last;  // measured duration less the wait for the last arrival
      }
      groups_.push_back(std::move(g));
    }
    stats_.collectives_matched = static_cast<int64_t>(groups_.size());
    for (const Op& o : ops_) {
      if (is_collective_op(o) && o.coll < 0) ++stats_.collective_kernels_unmatched;
    }
  }

  void apply_durations() {
    for (Op& o : ops_) {
      const RankTrace& t = ranks_[o.rank];
      const Event& e = t.events[o.event];
      std::string_view name = t.name_of(e);
      double f = 1.0;
      for (int c = 0; c < kKernelClasses; ++c) {
        if (sc_.class_factor[static_cast<size_t>(c)] != 1.0 && in_class(static_cast<KernelClass>(c), name)) {
          f *= sc_.class_factor[static_cast<size_t>(c)];
        }
      }
      if (sc_.stream >= 0 && stream(o.stream).stream == sc_.stream) f *= sc_.stream_factor;
      if (is_collective_op(o)) f *= sc_.collective_factor;
      o.factor = f;
      o.dur = scaled(e.dur_ns, f);
      if (o.coll >= 0) o.transfer = scaled(o.transfer, f);
    }
    stats_.gpu_ops = static_cast<int64_t>(ops_.size());
  }

  // ---------- the simulation ----------
  struct Wake {
    int64_t t;
    uint64_t seq;
    int thread;
    bool operator>(const Wake& o) const { return t != o.t ? t > o.t : seq > o.seq; }
  };

  void schedule(int th, int64_t t) {
    queue_.push_back(Wake{t, seq_++, th});
    std::push_heap(queue_.begin(), queue_.end(), std::greater<Wake>());
  }

  // What every run needs that the trace fixes: the rank's streams, the event
  // records' capture slots, the job's measured begin.
  void prepare_runs() {
    for (Stream& st : streams_) {
      st.end_prefmax.resize(st.ops.size());
      int64_t m = std::numeric_limits<int64_t>::min();
      for (size_t q = 0; q < st.ops.size(); ++q) st.end_prefmax[q] = m = std::max(m, op(st.ops[q]).me);
    }
    int slots = 0;
    for (Call& c : calls_) {
      if (c.kind != CallKind::kEventRecord) continue;
      RankInfo& ri = info_[c.rank];
      for (int64_t corr : c.corrs) {
        auto it = ri.record_stream_of.find(corr);
        if (it != ri.record_stream_of.end()) c.record_stream_of = it->second;
        auto [slot, fresh] = ri.capture_slot.try_emplace(corr, slots);
        if (fresh) ++slots;
        c.capture_slots.push_back(slot->second);
      }
    }
    for (Call& c : calls_) {
      if ((c.kind != CallKind::kStreamWait && c.kind != CallKind::kEventSync) || c.record_corr == trace::kNone) continue;
      const RankInfo& ri = info_[c.rank];
      auto it = ri.capture_slot.find(c.record_corr);
      if (it != ri.capture_slot.end()) c.capture_slot = it->second;
    }
    captured_.assign(static_cast<size_t>(slots), kNotCaptured);
    call_start_.assign(calls_.size(), kUnset);
    call_end_.assign(calls_.size(), kUnset);
    origin_ = std::numeric_limits<int64_t>::max();
    for (const Thread& x : threads_) origin_ = std::min(origin_, x.begin);
    for (const Op& o : ops_) origin_ = std::min(origin_, o.ms);
    if (origin_ == std::numeric_limits<int64_t>::max()) origin_ = 0;
  }

  // The executed state back to before the first call.
  void reset() {
    for (Op& o : ops_) {
      o.launched = false;
      o.launch_t = 0;
      o.waits.clear();
      o.dependents.clear();
      o.waiters.clear();
      o.start = o.end = kUnset;
    }
    for (Stream& s : streams_) {
      s.last_launched = -1;
      s.pending_waits.clear();
    }
    for (Thread& x : threads_) {
      x.next = 0;
      x.begin_exec = x.begin;
      x.end = kUnset;
      x.last_launch_stream = -1;
      x.has_record = false;
      x.last_record_op = -1;
      x.pending_waits.clear();
      x.blocked_call = -1;
      x.blocked_at = 0;
      x.blocked_on.clear();
      x.gated_at = kUnset;
      x.gate_waiters.clear();
    }
    for (Group& g : groups_) {
      g.arrived = 0;
      g.last_arrival = kUnset;
    }
    std::fill(captured_.begin(), captured_.end(), kNotCaptured);
    queue_.clear();
    seq_ = 0;
    work_.clear();
    now_ = kUnset;
    stats_.waits_ignored = 0;
  }

 public:
  // `dur`: each GPU op's duration when it starts (null: the scenario's).
  Status simulate(const Program::DurationFn* dur) {
    reset();
    dur_ = dur;
    for (int th = 0; th < static_cast<int>(threads_.size()); ++th) {
      Thread& x = thread(th);
      // A thread without runtime calls is its CPU work alone (its tail from its begin).
      release(th, x.woken ? kUnset : x.begin + (x.calls.empty() ? x.tail : x.pre[0]));
    }
    // The ops a stream holds before its first launch of the step were launched
    // before the step: they are in the queue from the start, and a sync waits for them.
    for (Stream& s : streams_) {
      for (size_t p = 0; p < s.ops.size() && op(s.ops[p]).call < 0; ++p) s.last_launched = static_cast<int>(p);
    }
    for (int i = 0; i < static_cast<int>(ops_.size()); ++i) {
      if (op(i).fixed) work_.push_back(i);
    }
    drain();
    while (!queue_.empty()) {
      std::pop_heap(queue_.begin(), queue_.end(), std::greater<Wake>());
      Wake w = queue_.back();
      queue_.pop_back();
      now_ = w.t;
      run_call(w.thread, w.t);
    }
    int stuck_ops = 0, first_stuck = -1;
    for (int i = 0; i < static_cast<int>(ops_.size()); ++i) {
      if (op(i).end == kUnset) {
        ++stuck_ops;
        if (first_stuck < 0) first_stuck = i;
      }
    }
    int stuck_threads = 0;
    for (const Thread& x : threads_) stuck_threads += x.end == kUnset;
    if (stuck_ops > 0 || stuck_threads > 0) {
      std::string what = std::to_string(stuck_ops) + " GPU ops never ran and " + std::to_string(stuck_threads) +
                         " CPU threads never finished";
      if (first_stuck >= 0) {
        const Op& o = op(first_stuck);
        what += ", e.g. " + std::string(ranks_[o.rank].name_of(ranks_[o.rank].events[o.event])) + " on stream " +
                std::to_string(stream(o.stream).stream);
      }
      return make_error(ranks_[op(first_stuck >= 0 ? first_stuck : 0).rank].path, "execution did not finish: " + what,
                        "the trace's launches, events or collectives wait on each other in a circle");
    }
    return {};
  }

 private:
  // The thread starts call `x.next` at time `t`.
  void run_call(int th, int64_t t) {
    Thread& x = thread(th);
    const int ci = x.calls[x.next];
    Call& c = call(ci);
    call_start_[static_cast<size_t>(ci)] = t;
    // Launches reach their streams' queues now.
    for (int o : c.ops) {
      Op& g = op(o);
      g.launched = true;
      g.launch_t = t;
      Stream& s = stream(g.stream);
      s.last_launched = std::max(s.last_launched, static_cast<int>(g.pos));
      for (int w : s.pending_waits) add_wait(o, w);
      s.pending_waits.clear();
      if (o == c.ops.front()) {
        for (int w : x.pending_waits) add_wait(o, w);
        x.pending_waits.clear();
      }
    }
    if (!c.ops.empty()) x.last_launch_stream = op(c.ops.back()).stream;
    for (int o : c.ops) work_.push_back(o);
    drain();
    // The ops the call waits for. One the trace shows ending after the call
    // returned was not waited on: the call waited at most for the last op
    // before it on its stream that ended by then (threads launching onto one
    // stream can launch out of their measured order here), if that one has
    // been launched; else for nothing.
    x.blocked_on.clear();
    auto wait_for = [&](int o) {
      if (op(o).me > c.me + kTolNs) o = last_ended_by(o, c.me + kTolNs);
      if (o < 0) {
        ++stats_.waits_ignored;
        return;
      }
      x.blocked_on.push_back(o);
    };
    switch (c.kind) {
      case CallKind::kEventRecord: {
        int s = c.record_stream_of;
        if (s < 0) s = x.last_launch_stream;
        int captured = captured_by_record(s, c.ms);
        for (int slot : c.capture_slots) captured_[static_cast<size_t>(slot)] = captured;
        x.has_record = true;
        x.last_record_op = captured;
        break;
      }
      case CallKind::kStreamWait: {
        int src = -1;
        if (c.record_corr != trace::kNone) {
          const int cap = captured_of(c);
          src = cap != kNotCaptured ? cap : c.static_src;
        } else if (x.has_record) {
          src = x.last_record_op;
        } else {
          src = c.static_src;
        }
        if (src >= 0) {
          if (c.wait_stream >= 0) {
            if (c.wait_stream != op(src).stream) stream(c.wait_stream).pending_waits.push_back(src);
          } else {
            x.pending_waits.push_back(src);
          }
        }
        break;
      }
      case CallKind::kDeviceSync:
        for (int si : rank_streams_[c.rank]) {
          int o = last_launched_op(si);
          if (o >= 0) wait_for(o);
        }
        break;
      case CallKind::kStreamSync: {
        int o = last_launched_op(c.sync_stream);
        if (o >= 0) wait_for(o);
        break;
      }
      case CallKind::kEventSync: {
        const int cap = c.record_corr != trace::kNone ? captured_of(c) : kNotCaptured;
        int o = cap != kNotCaptured ? cap : last_launched_op(c.sync_stream);
        if (o >= 0) wait_for(o);
        break;
      }
      case CallKind::kPlain: break;
    }
    if (c.memcpy_blocking) {
      for (int o : c.ops) wait_for(o);
    }
    x.blocked_call = ci;
    x.blocked_at = t;
    try_finish_call(th);
  }

  // The op the event record named by `c.record_corr` captured in this run
  // (-1: none), kNotCaptured if that record has not run.
  int captured_of(const Call& c) const {
    return c.capture_slot >= 0 ? captured_[static_cast<size_t>(c.capture_slot)] : kNotCaptured;
  }

  // The last op at or before op `o` on its stream whose measured end (and every
  // earlier one's) is no later than `t`, if it is launched (or queued before the
  // step); -1 if none.
  int last_ended_by(int o, int64_t t) const {
    const Stream& st = streams_[static_cast<size_t>(op(o).stream)];
    const auto end = st.end_prefmax.begin() + static_cast<std::ptrdiff_t>(op(o).pos) + 1;
    const auto p = std::upper_bound(st.end_prefmax.begin(), end, t) - st.end_prefmax.begin() - 1;
    if (p < 0) return -1;
    const int cand = st.ops[static_cast<size_t>(p)];
    return op(cand).launched || op(cand).fixed ? cand : -1;
  }

  // Last op launched so far on stream `s` (its position in the stream's order), -1 if none.
  int last_launched_op(int s) const {
    if (s < 0) return -1;
    const Stream& st = streams_[static_cast<size_t>(s)];
    return st.last_launched >= 0 ? st.ops[static_cast<size_t>(st.last_launched)] : -1;
  }

  // What an event record on stream `s` whose measured start is `ms` captures: the last op launched so far
  // on the stream, but none that the trace shows launched after the record (another thread's, launched
  // ahead of its measured order here): then the last op before it on the stream launched by `ms`, which
  // the stream runs first anyway. Capturing a later op would make the waiting stream wait on work queued
  // behind the recording thread's own next launches: a circle.
  int captured_by_record(int s, int64_t ms) const {
    if (s < 0) return -1;
    const Stream& st = streams_[static_cast<size_t>(s)];
    const int p = std::min(st.last_launched, st.last_launched_before(ms + kTolNs));
    return p >= 0 ? st.ops[static_cast<size_t>(p)] : -1;
  }

  void add_wait(int o, int src) {
    if (src < 0 || op(src).stream == op(o).stream) return;
    op(o).waits.push_back(src);
    op(src).dependents.push_back(o);
  }

  // The blocked call returns once every op it waits on has an end.
  void try_finish_call(int th) {
    Thread& x = thread(th);
    const Call& c = calls_[static_cast<size_t>(x.blocked_call)];
    const int64_t dur = c.me - c.ms;
    int64_t end = x.blocked_at + scaled(dur, sc_.cpu_factor);
    if (!x.blocked_on.empty()) {
      int64_t waited_meas = kUnset, waited = kUnset;
      for (int o : x.blocked_on) {
        if (op(o).end == kUnset) {
          op(o).waiters.push_back(th);
          return;
        }
        waited_meas = std::max(waited_meas, op(o).me);
        waited = std::max(waited, op(o).end);
      }
      const bool blocked = waited_meas > c.ms;
      // Blocked in the trace: its own cost is the wake-up after the GPU work
      // ended. Not blocked: its measured time, and the typical wake-up should
      // the GPU work now end later.
      const int64_t own = blocked ? std::clamp<int64_t>(c.me - waited_meas, 0, dur) : dur;
      // Its own time is CPU work (scenario's cpu factor); the typical wake-up a latency.
      const int64_t own_x = scaled(own, sc_.cpu_factor);
      const int64_t wake = blocked ? own_x : std::min(dur, info_[c.rank].tau_wake);
      end = std::max(x.blocked_at + own_x, waited + wake);
    }
    call_end_[static_cast<size_t>(x.blocked_call)] = std::max(end, now_);
    x.blocked_on.clear();
    x.blocked_call = -1;
    end = std::max(end, now_);
    ++x.next;
    release(th, end + (x.next < x.calls.size() ? x.pre[x.next] : x.tail));
    // Threads whose gate waited for this call to end.
    std::vector<int> waiting = std::move(x.gate_waiters);
    x.gate_waiters.clear();
    for (int w : waiting) release(w, thread(w).gated_at);
  }

  // The thread's next call starts (past its last call: the thread ends) at `t`, its own time, or later
  // where a gate from another thread's work says so (collect_flows); kUnset: the gates alone decide (a
  // woken thread's first call). A gate whose source call has not ended yet parks the thread on it.
  void release(int th, int64_t t) {
    Thread& x = thread(th);
    const size_t k = x.next;
    auto value = [&](const Gate& g, int64_t& v) {
      const Thread& src = thread(g.src);
      if (g.src_call >= 0 && src.next <= static_cast<size_t>(g.src_call)) return false;
      const int64_t anchor = g.src_call >= 0 ? call_end_[static_cast<size_t>(src.calls[static_cast<size_t>(g.src_call)])] : src.begin;
      v = anchor + g.after;
      return true;
    };
    int64_t at = t;
    auto park = [&](const Gate& g) {
      x.gated_at = t;
      thread(g.src).gate_waiters.push_back(th);
    };
    if (k == 0 && x.woken) {
      int64_t v = 0;
      if (!value(x.wake_gate, v)) return park(x.wake_gate);
      x.begin_exec = v + x.wake_ns;
      at = std::max(at, x.begin_exec + (x.calls.empty() ? x.tail : x.pre[0]));
    }
    if (k < x.gates.size()) {
      for (const Gate& g : x.gates[k]) {
        int64_t v = 0;
        if (!value(g, v)) return park(g);
        at = std::max(at, v);
      }
    }
    x.gated_at = kUnset;
    if (k < x.calls.size()) {
      schedule(th, at);
    } else {
      x.end = at;
    }
  }

  // An op starts at the latest of its constraints, each plus its latency: the
  // launch (call start + launch latency), the op before it on the stream (its
  // end + queue gap), the ops it waits for through events (their end + gap).
  // The constraint that explains the measured start with the least delay beyond
  // its typical latency keeps its measured latency; the others get their
  // typical latency, never more than measured.
  void try_start(int i) {
    Op& o = op(i);
    if (o.start != kUnset) return;
    if (!o.fixed && !o.launched) return;
    const Stream& s = stream(o.stream);
    const RankInfo& ri = info_[o.rank];
    const Op* prev = o.pos > 0 ? &op(s.ops[o.pos - 1]) : nullptr;
    if (prev && prev->end == kUnset) return;  // its end will start this one
    for (int w : o.waits) {
      if (op(w).end == kUnset) return;
    }
    // An op with no launching call in the step: queued behind the op before it
    // in the trace (gap within the typical queue gap), it was launched before
    // that op ended, so only the stream holds it; otherwise it keeps its
    // measured start as the earliest.
    const bool queued = prev && o.ms - prev->me <= ri.tau_gap + kTolNs;
    // The constraints (time, measured latency, typical latency), in order.
    auto constraints = [&](auto&& f) {
      if (o.fixed && !queued) {
        f(o.ms, int64_t{0}, int64_t{0});
      } else if (!o.fixed) {
        // A slow launching call (a first launch loading its module) that returned before its op started,
        // with nothing of the op's stream still running then: the call's own time (host work) came first,
        // so the op follows the call's executed end.
        const Call& lc = calls_[static_cast<size_t>(o.call)];
        if (lc.me - lc.ms >= ri.slow_launch && o.ms >= lc.me && (!prev || prev->me <= lc.me)) {
          f(o.launch_t + scaled(lc.me - lc.ms, sc_.cpu_factor), o.ms - lc.me,
            std::max<int64_t>(0, ri.tau_launch - (lc.me - lc.ms)));
        } else {
          f(o.launch_t, std::max<int64_t>(0, o.ms - o.launch_ms), ri.tau_launch);
        }
      }
      if (prev) f(prev->end, std::max<int64_t>(0, o.ms - prev->me), ri.tau_gap);
      for (int w : o.waits) f(op(w).end, std::max<int64_t>(0, o.ms - op(w).me), ri.tau_gap);
    };
    size_t bind = 0, k = 0;
    int64_t least = 0;
    constraints([&](int64_t, int64_t measured, int64_t typical) {
      if (k == 0 || measured - typical < least) {
        least = measured - typical;
        bind = k;
      }
      ++k;
    });
    int64_t start = kUnset;
    k = 0;
    constraints([&](int64_t t, int64_t measured, int64_t typical) {
      const int64_t lat = k == bind ? measured : std::min(measured, typical);
      start = std::max(start, t + lat);
      ++k;
    });
    o.start = start;
    if (o.coll >= 0) {
      Group& g = groups_[static_cast<size_t>(o.coll)];
      g.last_arrival = std::max(g.last_arrival, start);
      if (++g.arrived < static_cast<int>(g.members.size())) return;
      for (int m : g.members) {
        op(m).end = g.last_arrival + (dur_ ? (*dur_)(static_cast<uint32_t>(m), g.last_arrival - origin_) : op(m).transfer);
      }
      for (int m : g.members) finished(m);
      return;
    }
    o.end = start + (dur_ ? (*dur_)(static_cast<uint32_t>(i), start - origin_) : o.dur);
    finished(i);
  }

  // Ops to try to start, processed without recursion (streams run long chains).
  void drain() {
    while (!work_.empty()) {
      int i = work_.back();
      work_.pop_back();
      try_start(i);
    }
  }

  void finished(int i) {
    Op& o = op(i);
    const Stream& s = stream(o.stream);
    if (o.pos + 1 < s.ops.size()) work_.push_back(s.ops[o.pos + 1]);
    for (int d : o.dependents) work_.push_back(d);
    std::vector<int> waiters = std::move(o.waiters);
    o.waiters.clear();
    for (int th : waiters) {
      if (thread(th).blocked_call >= 0) try_finish_call(th);
    }
  }

  // ---------- the answer ----------
  Execution report() {
    Execution ex;
    ex.ranks.resize(ranks_.size());
    int64_t jb_m = std::numeric_limits<int64_t>::max(), je_m = std::numeric_limits<int64_t>::min();
    int64_t jb = jb_m, je = je_m;
    std::vector<int64_t> mb(ranks_.size(), jb_m), me(ranks_.size(), je_m), b(ranks_.size(), jb_m),
        e(ranks_.size(), je_m);
    for (const Thread& x : threads_) {
      if (!x.in_span) continue;
      mb[x.rank] = std::min(mb[x.rank], x.begin);
      me[x.rank] = std::max(me[x.rank], x.end_meas);
      b[x.rank] = std::min(b[x.rank], x.begin);
      e[x.rank] = std::max(e[x.rank], x.end);
    }
    for (const Op& o : ops_) {
      mb[o.rank] = std::min(mb[o.rank], o.ms);
      me[o.rank] = std::max(me[o.rank], o.me);
      b[o.rank] = std::min(b[o.rank], o.start);
      e[o.rank] = std::max(e[o.rank], o.end);
    }
    for (uint32_t r = 0; r < ranks_.size(); ++r) {
      RankExecution& re = ex.ranks[r];
      re.path = ranks_[r].path;
      re.rank = ranks_[r].rank;
      if (mb[r] > me[r]) continue;  // nothing on this rank
      const int64_t base = info_[r].base;
      re.measured_begin_ns = mb[r] - base;
      re.measured_end_ns = me[r] - base;
      re.begin_ns = b[r] - base;
      re.end_ns = e[r] - base;
      jb_m = std::min(jb_m, mb[r]);
      je_m = std::max(je_m, me[r]);
      jb = std::min(jb, b[r]);
      je = std::max(je, e[r]);
    }
    for (const Op& o : ops_) {
      const int64_t base = info_[o.rank].base;
      ex.ranks[o.rank].gpu_ops.push_back(GpuOpTime{o.event, o.start - base, o.end - base});
    }
    for (auto& re : ex.ranks) {
      std::sort(re.gpu_ops.begin(), re.gpu_ops.end(),
                [](const GpuOpTime& x, const GpuOpTime& y) { return x.event < y.event; });
    }
    stats_.blocking_calls = count_blocking_calls();
    ex.measured_span_ns = period(true, je_m > jb_m ? je_m - jb_m : 0);
    ex.span_ns = period(false, je > jb ? je - jb : 0);
    ex.pipelined = loops();
    ex.stats = stats_;
    return ex;
  }

  int64_t count_blocking_calls() const {
    int64_t n = 0;
    for (const Call& c : calls_) {
      if (c.kind == CallKind::kDeviceSync || c.kind == CallKind::kStreamSync || c.kind == CallKind::kEventSync ||
          c.memcpy_blocking) {
        ++n;
      }
    }
    return n;
  }

  const std::vector<RankTrace>& ranks_;
  Scenario sc_;
  std::vector<RankInfo> info_;
  std::vector<Op> ops_;
  std::vector<int> queued_;  // find_queued_ops
  bool tail_loop_ = false;   // find_gpu_tail_loop
  std::vector<Stream> streams_;
  std::vector<Call> calls_;
  // Each rank's streams and calls, in index order (index_by_rank), so that a rank's loops do not scan
  // every rank's.
  std::vector<std::vector<int>> rank_streams_, rank_calls_;
  std::vector<Thread> threads_;
  std::vector<Group> groups_;
  ExecutionStats stats_;
  std::vector<Wake> queue_;  // a min-heap on (time, order of scheduling)
  std::vector<int> captured_;  // per capture slot: the op captured in this run (-1: none)
  std::vector<int64_t> call_start_, call_end_;  // per call, executed
  const Program::DurationFn* dur_ = nullptr;
  int64_t origin_ = 0;  // the job's measured begin
  uint64_t seq_ = 0;
  std::vector<int> work_;
  int64_t now_ = kUnset;
};

}  // namespace

const char* to_string(KernelClass c) {
  switch (c) {
    case KernelClass::kGemm: return "gemm";
    case KernelClass::kElementwise: return "elementwise";
    case KernelClass::kReduce: return "reduce";
    case KernelClass::kAttention: return "attention";
    case KernelClass::kCopy: return "copy";
  }
  return "unknown";
}

std::optional<KernelClass> kernel_class_from_string(std::string_view s) {
  for (int c = 0; c < kKernelClasses; ++c) {
    if (s == to_string(static_cast<KernelClass>(c))) return static_cast<KernelClass>(c);
  }
  return std::nullopt;
}

const std::vector<std::string_view>& keywords_of(KernelClass c) {
  static const std::vector<std::string_view> kWords[kKernelClasses] = {
      {"gemm", "cutlass", "xmma", "matmul"},
      {"elementwise"},
      {"reduce"},
      {"attention", "flash", "fmha"},
      {"copy", "memcpy"},
  };
  return kWords[static_cast<int>(c)];
}

bool in_class(KernelClass c, std::string_view name) {
  if (istarts(name, "nccl")) return false;
  for (std::string_view w : keywords_of(c)) {
    if (icontains(name, w)) return true;
  }
  return false;
}

Status parse_scale(std::string_view spec, Scenario& s) {
  auto eq = spec.rfind('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == spec.size()) {
    return make_error(std::string(spec), "expected CLASS=FACTOR, stream:N=FACTOR, collective=FACTOR or cpu=FACTOR");
  }
  std::string sel(spec.substr(0, eq)), num(spec.substr(eq + 1));
  char* end = nullptr;
  double f = std::strtod(num.c_str(), &end);
  if (end == num.c_str() || *end != '\0' || !std::isfinite(f) || f < 0 || f > 1e6) {
    return make_error(std::string(spec), "factor '" + num + "' is not a number in [0, 1e6]");
  }
  if (sel == "collective") {
    s.collective_factor *= f;
  } else if (sel == "cpu") {
    s.cpu_factor *= f;
  } else if (sel.rfind("stream:", 0) == 0) {
    std::string id = sel.substr(7);
    char* e2 = nullptr;
    long v = std::strtol(id.c_str(), &e2, 10);
    if (id.empty() || *e2 != '\0' || v < 0 || v > std::numeric_limits<int32_t>::max()) {
      return make_error(std::string(spec), "expected stream:N with N a stream id");
    }
    if (s.stream >= 0 && s.stream != v) return make_error(std::string(spec), "only one stream can be scaled");
    s.stream = static_cast<int32_t>(v);
    s.stream_factor *= f;
  } else if (auto c = kernel_class_from_string(sel)) {
    s.class_factor[static_cast<size_t>(*c)] *= f;
  } else {
    return make_error(std::string(spec), "unknown selector '" + sel + "'",
                      "classes: gemm, elementwise, reduce, attention, copy; or stream:N, collective, cpu");
  }
  return {};
}

Result<Execution> execute(const std::vector<trace::RankTrace>& ranks, const Scenario& scenario) {
  Executor x(ranks, scenario);
  return x.run();
}

struct Program::Impl {
  Impl(const std::vector<trace::RankTrace>& ranks, const Scenario& scenario) : x(ranks, scenario) {}
  Executor x;
  std::vector<GpuOp> ops;
  std::vector<std::vector<uint32_t>> collectives;
  std::vector<Call> calls;
  std::vector<Thread> threads;
};

Program::Program(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Program::Program(Program&&) noexcept = default;
Program& Program::operator=(Program&&) noexcept = default;
Program::~Program() = default;

Result<Program> Program::compile(const std::vector<trace::RankTrace>& ranks, const Scenario& scenario) {
  auto impl = std::make_unique<Impl>(ranks, scenario);
  Executor& x = impl->x;
  EMO_RETURN_IF_ERROR(x.build());
  const int64_t origin = x.origin();
  impl->ops.reserve(x.num_ops());
  for (size_t i = 0; i < x.num_ops(); ++i) {
    const Op& o = x.op_at(i);
    impl->ops.push_back(GpuOp{o.rank, o.event, o.coll, o.coll >= 0 ? o.transfer : o.dur});
  }
  for (const Group& g : x.groups()) {
    auto& m = impl->collectives.emplace_back();
    for (int i : g.members) m.push_back(static_cast<uint32_t>(i));
  }
  const auto& threads = x.all_threads();
  for (const auto& c : x.all_calls()) {
    const auto& th = threads[static_cast<size_t>(c.thread)];
    impl->calls.push_back(Call{c.rank, th.lane, c.ms - origin, c.me - origin});
  }
  for (const auto& th : threads) impl->threads.push_back(Thread{th.rank, th.lane, th.begin - origin, th.end_meas - origin});
  return Program(std::move(impl));
}

const std::vector<Program::GpuOp>& Program::gpu_ops() const { return impl_->ops; }
const std::vector<std::vector<uint32_t>>& Program::collectives() const { return impl_->collectives; }
const std::vector<Program::Call>& Program::calls() const { return impl_->calls; }
const std::vector<Program::Thread>& Program::threads() const { return impl_->threads; }
int64_t Program::to_run(uint32_t rank, int64_t trace_ns) const {
  return trace_ns + impl_->x.base(rank) - impl_->x.origin();
}
Status Program::run(const DurationFn& dur) { return impl_->x.simulate(&dur); }
int64_t Program::op_start(uint32_t op) const { return impl_->x.op_at(op).start - impl_->x.origin(); }
int64_t Program::op_end(uint32_t op) const { return impl_->x.op_at(op).end - impl_->x.origin(); }
int64_t Program::call_start(uint32_t call) const { return impl_->x.call_start_at(call) - impl_->x.origin(); }
int64_t Program::call_end(uint32_t call) const { return impl_->x.call_end_at(call) - impl_->x.origin(); }
int64_t Program::thread_begin(uint32_t thread) const {
  return impl_->x.all_threads()[thread].begin_exec - impl_->x.origin();
}
int64_t Program::thread_end(uint32_t thread) const {
  return impl_->x.all_threads()[thread].end - impl_->x.origin();
}
int64_t Program::end_ns() const { return impl_->x.executed_end() - impl_->x.origin(); }
int64_t Program::period_ns() const { return impl_->x.executed_period(); }
bool Program::pipelined() const { return impl_->x.loops(); }

Result<std::vector<trace::RankTrace>> load_step(const std::vector<std::string>& paths, std::optional<int64_t> step) {
  if (paths.empty()) return make_error("", "no trace given");
  std::vector<trace::RankTrace> out;
  for (const auto& p : paths) {
    auto t = trace::read_trace(p);
    if (!t.ok()) return t.error();
    out.push_back(std::move(t).value());
  }
  bool all_ranked = std::all_of(out.begin(), out.end(), [](const auto& t) { return t.rank >= 0; });
  if (all_ranked) {
    std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  }
  for (auto& t : out) {
    auto s = trace::select_step(t, step);
    if (!s.ok()) return s.error();
  }
  return out;
}

}  // namespace emo::executor
