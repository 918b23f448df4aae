// The overlay: a rank's original trace text with two extra tracks on an "EMO packs" process — each
// pack as an async span ("b"/"e", clock and class in args) and the SM clock as a counter ("C"). The
// original events are copied byte for byte; the new ones go first in traceEvents. Times: the reader
// puts ts_ns = 0 at the earliest event (origin_ns = baseTimeNanoseconds + that event's ts), so a time
// t from the trace origin is written back as ts = (origin_ns - baseTimeNanoseconds + t) / 1000 µs.
#include <zlib.h>

#include <cstdlib>

#include <fmt/format.h>

#include "emo/graph/graph.h"
#include "emo/report/report.h"

namespace emo::report {

namespace {

constexpr int64_t kPacksPid = 0x7ffe0000;  // far from real process ids

// baseTimeNanoseconds at the top level of the trace, 0 when absent.
int64_t base_time_ns(std::string_view text) {
  const size_t k = text.find("\"baseTimeNanoseconds\"");
  if (k == std::string_view::npos) return 0;
  size_t i = text.find(':', k);
  if (i == std::string_view::npos) return 0;
  ++i;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r' || text[i] == '"')) ++i;
  int64_t v = 0;
  bool neg = false;
  if (i < text.size() && text[i] == '-') neg = true, ++i;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') v = v * 10 + (text[i++] - '0');
  return neg ? -v : v;
}

}  // namespace

Result<std::string> read_text(const std::string& path) {
  // gzread reads plain files through unchanged.
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) return make_error(path, "cannot open");
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const int n = gzread(f, buf, sizeof buf);
    if (n < 0) {
      gzclose(f);
      return make_error(path, "cannot read (corrupt gzip data?)");
    }
    if (n == 0) break;
    out.append(buf, size_t(n));
  }
  gzclose(f);
  return out;
}

Result<std::string> overlay_json(std::string_view original, const std::string& name, const ReportData& d,
                                 uint32_t gpu) {
  const analysis::Workload& w = *d.workload;
  const pack::Packing& p = *d.packing;
  const graph::Graph& g = w.graph;
  if (gpu >= p.gpus.size() || gpu >= w.ranks.size()) return make_error(name, "no such rank in the run");
  const size_t key = original.find("\"traceEvents\"");
  size_t open = key == std::string_view::npos ? key : original.find('[', key);
  if (open == std::string_view::npos) return make_error(name, "no traceEvents array to add the packs to");
  size_t next = open + 1;
  while (next < original.size() && (original[next] == ' ' || original[next] == '\n' || original[next] == '\r' || original[next] == '\t')) ++next;
  const bool empty = next < original.size() && original[next] == ']';

  // Pack times are from the replayed step's start; one op of the rank ties them to its trace times.
  const trace::RankTrace& t = w.ranks[gpu];
  int64_t delta = 0;
  for (const pack::Pack& pk : p.packs) {
    if (pk.rank.index() != gpu || pk.first_op > pk.last_op) continue;
    const graph::NodeId n = p.gpus[gpu].ops[pk.first_op];
    if (g.event[n] < t.events.size()) delta = t.events[g.event[n]].ts_ns - pk.begin_ns;
    break;
  }
  const int64_t shift = t.origin_ns - base_time_ns(original) + delta;
  auto ts = [&](int64_t ns) { return fmt::format("{:.3f}", double(ns + shift) / 1e3); };

  fmt::memory_buffer b;
  auto out = std::back_inserter(b);
  fmt::format_to(out, "\n{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"tid\":0,\"args\":{{\"name\":\"EMO packs (rank {})\"}}}}",
                 kPacksPid, g.rank_ids[gpu]);
  fmt::format_to(out, ",\n{{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":{},\"tid\":0,\"args\":{{\"sort_index\":-1}}}}", kPacksPid);
  std::vector<uint32_t> mine;
  for (uint32_t i = 0; i < p.packs.size(); ++i)
    if (p.packs[i].rank.index() == gpu) mine.push_back(i);
  // A clock stays set until the next change: between packs the GPU runs at the clock of the pack before,
  // and before the first pack at the clock the step's last pack left (the steady state the models price).
  auto clock_of = [&](uint32_t i) { return i < d.pack_clock_mhz.size() ? d.pack_clock_mhz[i] : d.default_clock_mhz; };
  if (!mine.empty() && p.packs[mine.front()].begin_ns > 0) {
    fmt::format_to(out, ",\n{{\"ph\":\"C\",\"name\":\"SM clock (MHz)\",\"pid\":{},\"tid\":0,\"ts\":{},\"args\":{{\"MHz\":{}}}}}",
                   kPacksPid, ts(0), clock_of(mine.back()));
  }
  for (size_t k = 0; k < mine.size(); ++k) {
    const uint32_t i = mine[k];
    const pack::Pack& pk = p.packs[i];
    const int clock = clock_of(i);
    const uint32_t ops = pk.first_op <= pk.last_op ? pk.last_op - pk.first_op + 1 : 0;
    const std::string args = fmt::format(
        "{{\"pack\":{},\"clock_mhz\":{},\"slack\":\"{}\",\"bound\":\"{}\",\"ops\":{},\"busy_us\":{:.3f}}}", i, clock,
        pack::to_string(pk.slack), pack::to_string(pk.bound), ops, double(pk.busy_ns) / 1e3);
    fmt::format_to(out, ",\n{{\"ph\":\"b\",\"cat\":\"emo_pack\",\"name\":\"pack {} @ {} MHz\",\"id\":{},\"pid\":{},\"tid\":0,\"ts\":{},\"args\":{}}}",
                   i, clock, i, kPacksPid, ts(pk.begin_ns), args);
    fmt::format_to(out, ",\n{{\"ph\":\"e\",\"cat\":\"emo_pack\",\"name\":\"pack {} @ {} MHz\",\"id\":{},\"pid\":{},\"tid\":0,\"ts\":{}}}",
                   i, clock, i, kPacksPid, ts(pk.end_ns));
    fmt::format_to(out, ",\n{{\"ph\":\"C\",\"name\":\"SM clock (MHz)\",\"pid\":{},\"tid\":0,\"ts\":{},\"args\":{{\"MHz\":{}}}}}",
                   kPacksPid, ts(pk.begin_ns), clock);
  }
  if (!empty) b.push_back(',');
  std::string res;
  res.reserve(original.size() + b.size());
  res.append(original.substr(0, open + 1));
  res.append(b.data(), b.size());
  res.append(original.substr(open + 1));
  return res;
}

}  // namespace emo::report
