// Tests of the Kineto trace reader: both spellings, time conversion, lanes,
// args, NCCL metadata, bad events counted, broken files fatal, gzip, and the
// real traces in ../shared (skipped when absent).
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "emo/trace/trace.h"
#include "test_util.h"

namespace emo::trace {
namespace {

std::string data_path(const std::string& name) { return std::string(EMO_TEST_DATA_DIR) + "/traces/" + name; }

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_gzip(const std::string& path, const std::string& text) {
  gzFile gz = gzopen(path.c_str(), "wb");
  ASSERT_NE(gz, nullptr);
  ASSERT_EQ(gzwrite(gz, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
  ASSERT_EQ(gzclose(gz), Z_OK);
}

// One line per event with everything the later stages use, lane resolved.
std::vector<std::string> table(const RankTrace& t) {
  std::vector<std::string> rows;
  for (const Event& e : t.events) {
    const Lane& l = t.lanes.at(e.lane);
    std::ostringstream os;
    os << e.ts_ns << " " << e.dur_ns << " " << to_string(e.kind) << " '" << t.name_of(e) << "' "
       << (l.gpu ? "gpu" : "cpu") << " pid=" << l.pid << " tid=" << l.tid << " dev=" << e.device
       << " stream=" << e.stream << " corr=" << e.correlation << " ext=" << e.external_id
       << " sync=" << static_cast<int>(e.sync) << " lane='" << t.strings.view(l.name) << "'";
    rows.push_back(os.str());
  }
  return rows;
}

RankTrace parse_ok(const std::string& json, const ReadOptions& options = {}) {
  Result<RankTrace> r = parse_trace(json, "test.json", options);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message());
  return r.ok() ? std::move(r).value() : RankTrace{};
}

const ImportStat* find_row(const RankTrace& t, const std::string& what) {
  for (const ImportStat& r : t.stats.rows) {
    if (r.what == what) return &r;
  }
  return nullptr;
}

// Minimal complete event on CPU thread (1, 1).
std::string cpu_event(const std::string& name, const std::string& ts, const std::string& dur) {
  return R"({"ph":"X","cat":"cpu_op","name":")" + name + R"(","pid":1,"tid":1,"ts":)" + ts + R"(,"dur":)" +
         dur + "}";
}

std::string trace_of(const std::vector<std::string>& events, const std::string& extra_top = "") {
  std::string s = "{" + extra_top + (extra_top.empty() ? "" : ",") + R"("traceEvents":[)";
  for (size_t i = 0; i < events.size(); ++i) s += (i ? ",\n" : "\n") + events[i];
  return s + "\n]}";
}

TEST(TraceReader, LegacySpellingGivesSameTablesAsModern) {
  Result<RankTrace> modern = read_trace(data_path("tiny_modern.json"));
  Result<RankTrace> legacy = read_trace(data_path("tiny_legacy.json"));
  ASSERT_TRUE(modern.ok()) << modern.error().message();
  ASSERT_TRUE(legacy.ok()) << legacy.error().message();
  EXPECT_EQ(table(*modern), table(*legacy));
  EXPECT_EQ(modern->origin_ns, legacy->origin_ns);
  ASSERT_EQ(modern->steps.size(), 2u);
  ASSERT_EQ(legacy->steps.size(), 2u);
  EXPECT_EQ(legacy->steps[1].number, 4);
  EXPECT_EQ(legacy->steps[1].ts_ns, modern->steps[1].ts_ns);
}

TEST(TraceReader, TinyTraceHasKindsLanesNamesAndTopLevelFields) {
  Result<RankTrace> r = read_trace(data_path("tiny_modern.json"));
  ASSERT_TRUE(r.ok()) << r.error().message();
  const RankTrace& t = *r;
  EXPECT_EQ(t.rank, 1);
  EXPECT_EQ(t.world_size, 2);
  EXPECT_EQ(t.device_name, "Tiny GPU");
  EXPECT_EQ(t.origin_ns, 1000 * 1000);  // earliest kept event: ProfilerStep#3 at 1000 µs
  EXPECT_EQ(t.stats.events_total, 20);
  EXPECT_EQ(t.stats.events_kept, 13);  // 20 - 2 flows - 1 instant - 3 metadata - 1 Trace span
  EXPECT_EQ(t.stats.error_count(), 0);
  std::map<EventKind, int> kinds;
  for (const Event& e : t.events) ++kinds[e.kind];
  EXPECT_EQ(kinds[EventKind::kUserAnnotation], 2);
  EXPECT_EQ(kinds[EventKind::kCpuOp], 3);
  EXPECT_EQ(kinds[EventKind::kRuntime], 4);
  EXPECT_EQ(kinds[EventKind::kKernel], 2);
  EXPECT_EQ(kinds[EventKind::kMemcpy], 1);
  EXPECT_EQ(kinds[EventKind::kMemset], 1);
  // Lanes: CPU threads first by (pid, tid), then GPU streams; names from metadata.
  ASSERT_EQ(t.lanes.size(), 3u);
  EXPECT_FALSE(t.lanes[0].gpu);
  EXPECT_EQ(t.lanes[0].tid, 100);
  EXPECT_EQ(t.strings.view(t.lanes[0].name), "thread 100 (python)");
  EXPECT_EQ(t.lanes[1].tid, 101);
  EXPECT_TRUE(t.lanes[2].gpu);
  EXPECT_EQ(t.lanes[2].device, 0);
  EXPECT_EQ(t.lanes[2].stream, 7);
  EXPECT_EQ(t.strings.view(t.lanes[2].name), "stream 7");
  // Skipped kinds are informational rows.
  const ImportStat* flows = find_row(t, "flow events (ph 's') skipped");
  ASSERT_NE(flows, nullptr);
  EXPECT_FALSE(flows->is_error);
  EXPECT_EQ(flows->count, 1);
  ASSERT_NE(find_row(t, "profiler 'Trace' spans skipped"), nullptr);
  // Sorted by ts; the kernel keeps its correlation and External id.
  for (size_t i = 1; i < t.events.size(); ++i) EXPECT_LE(t.events[i - 1].ts_ns, t.events[i].ts_ns);
  for (const Event& e : t.events) {
    if (t.name_of(e) == "gemm_kernel") {
      EXPECT_EQ(e.ts_ns, 30 * 1000);
      EXPECT_EQ(e.dur_ns, 40 * 1000);
      EXPECT_EQ(e.correlation, 11);
      EXPECT_EQ(e.external_id, 2);
      EXPECT_EQ(e.collective, kNoIndex);
    }
  }
}

TEST(TraceReader, FractionalMicrosecondsRoundToNearestNanosecond) {
  RankTrace t = parse_ok(trace_of({
      cpu_event("a", "1365627862757.064", "87412.863"),
      cpu_event("b", "1365627862757.0645", "0.0015"),   // +0.5 ns rounds away from zero; dur 1.5 ns -> 2
      cpu_event("c", "1365627862757.06549", "0.0004"),  // +1.49 ns -> 1; dur 0.4 ns -> 0
      cpu_event("d", "1365627862758", "2"),             // integer µs
      cpu_event("e", "1365627862757.1e0", "1E-3"),      // exponent forms go through double
  }));
  ASSERT_EQ(t.events.size(), 5u);
  EXPECT_EQ(t.origin_ns, 1365627862757064);
  std::map<std::string, std::pair<int64_t, int64_t>> by_name;
  for (const Event& e : t.events) by_name[std::string(t.name_of(e))] = {e.ts_ns, e.dur_ns};
  EXPECT_EQ(by_name["a"], std::make_pair(int64_t{0}, int64_t{87412863}));
  EXPECT_EQ(by_name["b"], std::make_pair(int64_t{1}, int64_t{2}));
  EXPECT_EQ(by_name["c"], std::make_pair(int64_t{1}, int64_t{0}));
  EXPECT_EQ(by_name["d"], std::make_pair(int64_t{936}, int64_t{2000}));
  EXPECT_EQ(by_name["e"].second, 1);
}

TEST(TraceReader, BaseTimeNanosecondsAfterTraceEventsSetsOrigin) {
  // Modern Kineto writes baseTimeNanoseconds after traceEvents; ts are relative to it.
  RankTrace t = parse_ok(trace_of({cpu_event("late", "20", "1"), cpu_event("early", "10.5", "1")}));
  EXPECT_EQ(t.origin_ns, 10500);  // without it, origin is the earliest ts itself
  std::string json = R"({"traceEvents":[)" + cpu_event("late", "20", "1") + "," +
                     cpu_event("early", "10.5", "1") +
                     R"(],"displayTimeUnit":"ms","baseTimeNanoseconds":1700000000000000000})";
  RankTrace b = parse_ok(json);
  EXPECT_EQ(b.origin_ns, 1700000000000010500);
  ASSERT_EQ(b.events.size(), 2u);
  EXPECT_EQ(b.name_of(b.events[0]), "early");
  EXPECT_EQ(b.events[0].ts_ns, 0);
  EXPECT_EQ(b.events[1].ts_ns, 9500);
}

TEST(TraceReader, RankAndWorldSizeFromDistributedInfo) {
  RankTrace t = parse_ok(trace_of(
      {cpu_event("a", "1", "1")},
      R"("distributedInfo":{"backend":"nccl","rank":3,"world_size":8,"pg_config":[{"ranks":[0,1]}]})"));
  EXPECT_EQ(t.rank, 3);
  EXPECT_EQ(t.world_size, 8);
  RankTrace none = parse_ok(trace_of({cpu_event("a", "1", "1")}));
  EXPECT_EQ(none.rank, -1);
  EXPECT_EQ(none.world_size, -1);
  RankTrace no_rank = parse_ok(
      trace_of({cpu_event("a", "1", "1")}, R"("distributedInfo":{"backend":"nccl","world_size":4})"));
  EXPECT_EQ(no_rank.rank, -1);
  EXPECT_EQ(no_rank.world_size, 4);
}

TEST(TraceReader, MalformedEventsAreCountedWithExamplesAndTheRestImports) {
  RankTrace t = parse_ok(trace_of({
      cpu_event("good1", "1", "1"),
      R"({"ph":"X","cat":"cpu_op","name":"no_ts","pid":1,"tid":1,"dur":3})",
      R"({"ph":"X","cat":"cpu_op","name":"neg","pid":1,"tid":1,"ts":5,"dur":-2})",
      R"({"ph":"X","cat":"cpu_op","name":"text_ts","pid":1,"tid":1,"ts":"soon","dur":2})",
      R"({"ph":"X","cat":"cpu_op","name":"no_ts_2","pid":1,"tid":1,"dur":4})",
      R"({"ph":"X","cat":"kernel","name":"k","pid":0,"tid":"somewhere","ts":5,"dur":2,"args":{"correlation":1}})",
      R"({"cat":"cpu_op","name":"no_ph","pid":1,"tid":1,"ts":5,"dur":2})",
      R"({"ph":"X","cat":"cpu_op","pid":1,"tid":1,"ts":5,"dur":2})",
      "42",
      R"({"ph":"X","cat":"cpu_op","name":"bad_corr","pid":1,"tid":1,"ts":6,"dur":1,"args":{"correlation":[1]}})",
      cpu_event("good2", "7", "1"),
      cpu_event("huge_ts", "1e300", "1"),
      cpu_event("huge_dur", "1", "99999999999999999999"),
  }));
  EXPECT_EQ(t.stats.events_total, 13);
  EXPECT_EQ(t.stats.events_kept, 3);  // good1, good2 and bad_corr (its bad field ignored)
  const ImportStat* no_ts = find_row(t, "event without ts");
  ASSERT_NE(no_ts, nullptr);
  EXPECT_TRUE(no_ts->is_error);
  EXPECT_EQ(no_ts->count, 2);
  // The example is the first offending event, as one line of its JSON.
  EXPECT_EQ(no_ts->example, R"(event 1: {"ph":"X","cat":"cpu_op","name":"no_ts","pid":1,"tid":1,"dur":3})");
  ASSERT_NE(find_row(t, "event with negative dur"), nullptr);
  ASSERT_NE(find_row(t, "event with non-numeric ts"), nullptr);
  ASSERT_NE(find_row(t, "kernel event without stream"), nullptr);
  ASSERT_NE(find_row(t, "event without ph"), nullptr);
  ASSERT_NE(find_row(t, "event without name"), nullptr);
  const ImportStat* not_object = find_row(t, "traceEvents entry is not an object");
  ASSERT_NE(not_object, nullptr);
  EXPECT_EQ(not_object->example, "event 8: 42");
  ASSERT_NE(find_row(t, "event with an args field of the wrong type (field ignored)"), nullptr);
  const ImportStat* range = find_row(t, "event with ts or dur out of range");
  ASSERT_NE(range, nullptr);
  EXPECT_EQ(range->count, 2);
  EXPECT_EQ(t.stats.error_count(), 11);
}

TEST(TraceReader, LongMalformedEventExampleIsTruncated) {
  std::string long_name(1000, 'x');
  RankTrace t =
      parse_ok(trace_of({cpu_event("ok", "1", "1"), R"({"ph":"X","cat":"cpu_op","name":")" + long_name +
                                                        R"(","pid":1,"tid":1,"dur":3})"}));
  const ImportStat* row = find_row(t, "event without ts");
  ASSERT_NE(row, nullptr);
  EXPECT_LT(row->example.size(), 230u);
  EXPECT_EQ(row->example.substr(row->example.size() - 3), "...");
}

TEST(TraceReader, BrokenFilesAreFatalWithWhereAndWhat) {
  std::string full = slurp(data_path("tiny_modern.json"));
  ASSERT_GT(full.size(), 1000u);
  Result<RankTrace> truncated = parse_trace(full.substr(0, full.size() / 2), "cut.json");
  ASSERT_FALSE(truncated.ok());
  EXPECT_EQ(truncated.error().where, "cut.json");
  EXPECT_NE(truncated.error().what.find("truncated JSON"), std::string::npos) << truncated.error().what;
  EXPECT_FALSE(truncated.error().note.empty());

  Result<RankTrace> not_json = parse_trace("hello, world", "hello.txt");
  ASSERT_FALSE(not_json.ok());
  EXPECT_EQ(not_json.error().what.rfind("not valid JSON", 0), 0u) << not_json.error().what;
  EXPECT_EQ(not_json.error().where.rfind("hello.txt", 0), 0u);

  // Broken inside an event: simdjson's message, with the byte offset in where.
  Result<RankTrace> bad_inside = parse_trace(R"({"traceEvents":[{"ph":"X" "name":"a"}]})", "bad.json");
  ASSERT_FALSE(bad_inside.ok());
  EXPECT_EQ(bad_inside.error().what.rfind("not valid JSON: ", 0), 0u) << bad_inside.error().what;
  EXPECT_EQ(bad_inside.error().where.rfind("bad.json:byte ", 0), 0u) << bad_inside.error().where;

  Result<RankTrace> empty = parse_trace(R"({"traceEvents": [ ], "schemaVersion": 1})", "empty.json");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().what, "traceEvents is empty");
  EXPECT_FALSE(empty.error().note.empty());

  Result<RankTrace> missing = parse_trace(R"({"schemaVersion": 1, "deviceProperties": []})", "missing.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().what, "no traceEvents array");

  Result<RankTrace> not_array = parse_trace(R"({"traceEvents": {"ph": "X"}})", "obj.json");
  ASSERT_FALSE(not_array.ok());
  EXPECT_EQ(not_array.error().what, "no traceEvents array");

  // HTA's memory_timeline.raw is JSON, but not a trace.
  Result<RankTrace> array = parse_trace("[[-1, 1, 37888, 7], [-1, 1, 512, 7]]", "memory_timeline.raw");
  ASSERT_FALSE(array.ok());
  EXPECT_NE(array.error().what.find("not a PyTorch profiler trace"), std::string::npos);

  Result<RankTrace> nothing = parse_trace("", "zero.json");
  ASSERT_FALSE(nothing.ok());
  EXPECT_NE(nothing.error().what.find("empty"), std::string::npos);
}

TEST(TraceReader, UnreadablePathIsFatal) {
  Result<RankTrace> r = read_trace("/nonexistent/dir/trace.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().where, "/nonexistent/dir/trace.json");
  EXPECT_EQ(r.error().what, "cannot read: No such file or directory");
  Result<RankTrace> dir = read_trace(std::string(EMO_TEST_DATA_DIR));
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.error().what, "cannot read: Is a directory");
}

TEST(TraceReader, GzipAndPlainGiveIdenticalTables) {
  std::string dir = test::temp_dir("trace_gz");
  std::string text = slurp(data_path("tiny_legacy.json"));
  // Detected by content, not by name: the second copy is called .json.
  write_gzip(dir + "/t.json.gz", text);
  write_gzip(dir + "/disguised.json", text);
  Result<RankTrace> plain = read_trace(data_path("tiny_legacy.json"));
  Result<RankTrace> gz = read_trace(dir + "/t.json.gz");
  Result<RankTrace> disguised = read_trace(dir + "/disguised.json");
  ASSERT_TRUE(plain.ok() && gz.ok() && disguised.ok());
  EXPECT_EQ(table(*plain), table(*gz));
  EXPECT_EQ(table(*plain), table(*disguised));
  EXPECT_EQ(plain->origin_ns, gz->origin_ns);
  EXPECT_EQ(plain->rank, gz->rank);

  // A gzip file cut short is fatal.
  std::string packed = slurp(dir + "/t.json.gz");
  {
    std::ofstream out(dir + "/cut.json.gz", std::ios::binary);
    out.write(packed.data(), static_cast<std::streamsize>(packed.size() / 2));
  }
  Result<RankTrace> cut = read_trace(dir + "/cut.json.gz");
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.error().what, "truncated gzip file");
  std::filesystem::remove_all(dir);
}

TEST(TraceReader, ConcatenatedGzipMembersReadAsOneText) {
  // Two gzip members: the size trailer of the last one says ~100 bytes, so the
  // text buffer must grow past several MB while inflating.
  std::vector<std::string> events;
  for (int i = 0; i < 100000; ++i)
    events.push_back(cpu_event("op" + std::to_string(i), std::to_string(i), "1"));
  std::string text = trace_of(events);
  ASSERT_GT(text.size(), 6u << 20);  // the buffer grows from malloc'd to mapped, then remaps
  std::string dir = test::temp_dir("trace_gz2");
  write_gzip(dir + "/a.gz", text.substr(0, text.size() - 100));
  write_gzip(dir + "/b.gz", text.substr(text.size() - 100));
  {
    std::ofstream out(dir + "/two.json.gz", std::ios::binary);
    out << slurp(dir + "/a.gz") << slurp(dir + "/b.gz");
  }
  Result<RankTrace> gz = read_trace(dir + "/two.json.gz");
  ASSERT_TRUE(gz.ok()) << gz.error().message();
  EXPECT_EQ(gz->events.size(), 100000u);
  EXPECT_EQ(table(*gz), table(parse_ok(text)));
  std::filesystem::remove_all(dir);
}

TEST(TraceReader, GzipMembersTrailingBytesAndDamageReadAsZlibReadsThem) {
  // Whichever inflater reads a file (libdeflate where it is built in, zlib otherwise), the answer
  // is zlib's: these are the cases where the fast path hands over.
  std::vector<std::string> events;
  for (int i = 0; i < 2000; ++i) events.push_back(cpu_event("op" + std::to_string(i), std::to_string(i), "1"));
  const std::string text = trace_of(events);
  std::string dir = test::temp_dir("trace_gz3");
  // Two members of the same size: the last one's size trailer fits the first member exactly.
  const size_t half = text.size() / 2;
  const std::string first = text.substr(0, half), second = text.substr(half, half);
  const std::string rest = text.substr(2 * half);
  ASSERT_EQ(first.size(), second.size());
  write_gzip(dir + "/a.gz", first);
  write_gzip(dir + "/b.gz", second + rest);
  write_gzip(dir + "/whole.gz", text);
  const std::string a = slurp(dir + "/a.gz"), b = slurp(dir + "/b.gz"), whole = slurp(dir + "/whole.gz");
  auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream out(dir + "/" + name, std::ios::binary);
    out << bytes;
  };
  write("two.json.gz", a + b);
  // Bytes after the member that are not another member are ignored, as gzip ignores them.
  write("garbage.json.gz", whole + "trailing bytes");
  // A flipped bit in the CRC: the data inflate, the check fails.
  std::string bad_crc = whole;
  bad_crc[bad_crc.size() - 8] = static_cast<char>(bad_crc[bad_crc.size() - 8] ^ 1);
  write("crc.json.gz", bad_crc);
  // A size trailer that says less than the text: the buffer grows while inflating.
  std::string short_size = whole;
  short_size[short_size.size() - 4] = 1;
  short_size[short_size.size() - 3] = short_size[short_size.size() - 2] = short_size[short_size.size() - 1] = 0;
  write("size.json.gz", short_size);

  const std::vector<std::string> want = table(parse_ok(text));
  for (const char* name : {"two.json.gz", "garbage.json.gz"}) {
    Result<RankTrace> t = read_trace(dir + "/" + name);
    ASSERT_TRUE(t.ok()) << name << ": " << t.error().message();
    EXPECT_EQ(table(*t), want) << name;
  }
  Result<RankTrace> crc = read_trace(dir + "/crc.json.gz");
  ASSERT_FALSE(crc.ok());
  EXPECT_EQ(crc.error().what, "not a valid gzip file: incorrect data check");
  Result<RankTrace> sized = read_trace(dir + "/size.json.gz");
  ASSERT_FALSE(sized.ok());  // zlib checks the length too
  EXPECT_EQ(sized.error().what, "not a valid gzip file: incorrect length check");
  std::filesystem::remove_all(dir);
}

TEST(TraceReader, TopLevelKeysAndEventFieldsInAnyOrder) {
  std::string a =
      R"({"traceEvents":[{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":10,"dur":5,"args":{"device":0,"stream":7,"correlation":9}}],"distributedInfo":{"rank":2},"deviceProperties":[{"name":"G"}]})";
  std::string b =
      R"({"deviceProperties":[{"name":"G"}], "distributedInfo":{"rank":2}, "traceEvents":[{"args":{"correlation":9,"stream":7,"device":0},"dur":5,"ts":10,"tid":7,"pid":0,"name":"k","cat":"kernel","ph":"X"}]})";
  RankTrace ta = parse_ok(a), tb = parse_ok(b);
  EXPECT_EQ(table(ta), table(tb));
  EXPECT_EQ(tb.rank, 2);
  EXPECT_EQ(tb.device_name, "G");
  ASSERT_EQ(tb.events.size(), 1u);
  EXPECT_EQ(tb.events[0].correlation, 9);
}

TEST(TraceReader, EnclosingEventsComeBeforeTheirChildren) {
  RankTrace t = parse_ok(trace_of({
      cpu_event("child", "10", "5"),
      cpu_event("parent", "10", "20"),
      cpu_event("grandparent", "10", "30"),
      cpu_event("next", "12", "1"),
  }));
  ASSERT_EQ(t.events.size(), 4u);
  EXPECT_EQ(t.name_of(t.events[0]), "grandparent");
  EXPECT_EQ(t.name_of(t.events[1]), "parent");
  EXPECT_EQ(t.name_of(t.events[2]), "child");
  EXPECT_EQ(t.name_of(t.events[3]), "next");
}

TEST(TraceReader, CudaSyncEventsUseArgsStreamAndPerDeviceLane) {
  RankTrace t = parse_ok(trace_of({
      // Newer Kineto: "Stream Sync" on tid = stream + 1000000; args.stream is the truth.
      R"({"ph":"X","cat":"cuda_sync","name":"Stream Sync","pid":0,"tid":1000007,"ts":10,"dur":1,"args":{"cuda_sync_kind":"Stream Sync","stream":7,"correlation":5,"device":0}})",
      // Context/Event Sync: stream -1 (written unsigned) -> per-device lane.
      R"({"ph":"X","cat":"cuda_sync","name":"Context Sync","pid":0,"tid":-1,"ts":11,"dur":1,"args":{"cuda_sync_kind":"Context Sync","stream":4294967295,"correlation":6,"device":0}})",
      R"({"ph":"X","cat":"cuda_sync","name":"Event Sync","pid":0,"tid":-1,"ts":12,"dur":1,"args":{"wait_on_stream":20,"wait_on_cuda_event_record_corr_id":32,"stream":-1,"correlation":54,"device":0}})",
      R"({"ph":"X","cat":"cuda_sync","name":"Stream Wait Event","pid":0,"tid":24,"ts":13,"dur":1,"args":{"cuda_sync_kind":"Stream Wait Event","wait_on_stream":20,"wait_on_cuda_event_record_corr_id":1385,"stream":24,"correlation":1389,"device":0}})",
      R"({"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":14,"dur":1,"args":{"stream":7,"correlation":4,"device":0}})",
  }));
  ASSERT_EQ(t.events.size(), 5u);
  const Event& ss = t.events[0];
  EXPECT_EQ(ss.sync, SyncKind::kStreamSync);
  EXPECT_EQ(ss.stream, 7);
  EXPECT_EQ(ss.lane, t.events[4].lane);  // same GPU lane as the kernel on stream 7
  const Event& cs = t.events[1];
  EXPECT_EQ(cs.sync, SyncKind::kContextSync);
  EXPECT_EQ(cs.stream, -1);
  EXPECT_EQ(t.lanes[cs.lane].stream, -1);
  EXPECT_EQ(t.events[2].lane, cs.lane);
  const Event& es = t.events[2];
  EXPECT_EQ(es.sync, SyncKind::kEventSync);  // from the name when cuda_sync_kind is absent
  EXPECT_EQ(es.wait_on_stream, 20);
  EXPECT_EQ(es.wait_on_event_record_corr, 32);
  const Event& swe = t.events[3];
  EXPECT_EQ(swe.sync, SyncKind::kStreamWaitEvent);
  EXPECT_EQ(swe.stream, 24);
  EXPECT_EQ(swe.wait_on_event_record_corr, 1385);
  EXPECT_EQ(t.events[4].sync, SyncKind::kNotSync);
  EXPECT_EQ(t.events[4].wait_on_stream, -1);
}

TEST(TraceReader, NcclKernelsCarryCollectiveArgs) {
  RankTrace t = parse_ok(trace_of({
      R"J({"ph":"X","cat":"kernel","name":"ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)","pid":0,"tid":40,"ts":1,"dur":5,"args":{"device":0,"stream":40,"correlation":1,"Collective name":"allreduce","In msg nelems":6637568,"Out msg nelems":6637568,"Group size":2,"dtype":"Float","Process Group Name":"0","Process Group Ranks":"[0, 1]","Seq":"12"}})J",
      R"J({"ph":"X","cat":"kernel","name":"ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)","pid":0,"tid":40,"ts":10,"dur":5,"args":{"device":0,"stream":40,"correlation":2}})J",
      R"J({"ph":"X","cat":"kernel","name":"ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)","pid":0,"tid":40,"ts":20,"dur":5,"args":{"device":0,"stream":40,"correlation":3,"Process Group Ranks":[0,1,2,3],"Seq":7}})J",
      R"J({"ph":"X","cat":"kernel","name":"ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)","pid":0,"tid":40,"ts":30,"dur":5,"args":{"device":0,"stream":40,"correlation":4}})J",
      R"J({"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":40,"dur":5,"args":{"device":0,"stream":7,"correlation":5}})J",
      R"J({"ph":"X","cat":"cpu_op","name":"record_param_comms","pid":1,"tid":1,"ts":0,"dur":5,"args":{"Collective name":"allreduce"}})J",
  }));
  ASSERT_EQ(t.events.size(), 6u);
  ASSERT_EQ(t.collectives.size(), 4u);
  auto coll = [&](int64_t corr) -> const CollectiveArgs* {
    for (const Event& e : t.events) {
      if (e.correlation == corr) return e.collective == kNoIndex ? nullptr : &t.collectives.at(e.collective);
    }
    return nullptr;
  };
  const CollectiveArgs* full = coll(1);
  ASSERT_NE(full, nullptr);
  EXPECT_EQ(t.strings.view(full->collective), "allreduce");
  EXPECT_EQ(t.strings.view(full->process_group), "0");
  EXPECT_EQ(full->seq, 12);
  EXPECT_EQ(full->group_size, 2);
  EXPECT_EQ(full->in_nelems, 6637568);
  EXPECT_EQ(full->out_nelems, 6637568);
  EXPECT_EQ(t.strings.view(full->dtype), "Float");
  const CollectiveArgs* bare = coll(2);  // no metadata: the collective comes from the name
  ASSERT_NE(bare, nullptr);
  EXPECT_EQ(t.strings.view(bare->collective), "allreduce");
  EXPECT_EQ(bare->seq, kNone);
  const CollectiveArgs* sendrecv = coll(3);
  ASSERT_NE(sendrecv, nullptr);
  EXPECT_EQ(t.strings.view(sendrecv->collective), "sendrecv");
  EXPECT_EQ(t.strings.view(sendrecv->process_group), "[0,1,2,3]");
  EXPECT_EQ(sendrecv->seq, 7);
  const CollectiveArgs* generic = coll(4);
  ASSERT_NE(generic, nullptr);
  EXPECT_EQ(generic->collective, kEmptyStr);
  EXPECT_EQ(coll(5), nullptr);
  for (const Event& e : t.events) {
    if (e.kind == EventKind::kCpuOp) {
      EXPECT_EQ(e.collective, kNoIndex);
    }
  }
}

// 2023-era traces (PARAM's DLRM) put a collective's size only on its `nccl:<collective>` annotation:
// each kernel launched inside one takes its Input Dims' elements and its Input type.
TEST(TraceReader, NcclKernelsWithoutSizesTakeTheirAnnotationsInputDims) {
  RankTrace t = parse_ok(trace_of({
      R"J({"ph":"X","cat":"user_annotation","name":"nccl:all_reduce","pid":1,"tid":1,"ts":0,"dur":10,"args":{"Input Dims":[[394241]],"Input type":["float"]}})J",
      R"J({"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":2,"dur":3,"args":{"correlation":1}})J",
      R"J({"ph":"X","cat":"user_annotation","name":"nccl:all_to_all","pid":1,"tid":1,"ts":20,"dur":10,"args":{"Input Dims":[[2, 3], [4]],"Input type":["long int", ""]}})J",
      R"J({"ph":"X","cat":"cpu_op","name":"aten::empty","pid":1,"tid":1,"ts":21,"dur":1,"args":{"Input Dims":[[7]],"Input type":["float"]}})J",
      R"J({"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":23,"dur":3,"args":{"correlation":2}})J",
      R"J({"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":40,"dur":3,"args":{"correlation":3}})J",
      R"J({"ph":"X","cat":"user_annotation","name":"nccl:all_reduce","pid":1,"tid":1,"ts":50,"dur":10,"args":{"Input Dims":[[-1]],"Input type":["float"]}})J",
      R"J({"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":52,"dur":3,"args":{"correlation":4}})J",
      R"J({"ph":"X","cat":"kernel","name":"ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)","pid":0,"tid":40,"ts":6,"dur":5,"args":{"device":0,"stream":40,"correlation":1}})J",
      R"J({"ph":"X","cat":"kernel","name":"ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)","pid":0,"tid":40,"ts":27,"dur":5,"args":{"device":0,"stream":40,"correlation":2}})J",
      R"J({"ph":"X","cat":"kernel","name":"ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)","pid":0,"tid":40,"ts":44,"dur":5,"args":{"device":0,"stream":40,"correlation":3}})J",
      R"J({"ph":"X","cat":"kernel","name":"ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)","pid":0,"tid":40,"ts":56,"dur":5,"args":{"device":0,"stream":40,"correlation":4,"In msg nelems":9,"dtype":"Half"}})J",
  }));
  auto coll = [&](int64_t corr) -> const CollectiveArgs& {
    for (const Event& e : t.events) {
      if (e.kind == EventKind::kKernel && e.correlation == corr) return t.collectives.at(e.collective);
    }
    ADD_FAILURE() << "no kernel of correlation " << corr;
    static const CollectiveArgs none;
    return none;
  };
  EXPECT_EQ(coll(1).in_nelems, 394241);
  EXPECT_EQ(t.strings.view(coll(1).dtype), "float");
  EXPECT_EQ(coll(2).in_nelems, 2 * 3 + 4);  // the innermost nccl: annotation, not aten::empty inside it
  EXPECT_EQ(t.strings.view(coll(2).dtype), "long int");
  EXPECT_EQ(t.strings.view(coll(2).collective), "sendrecv");  // the name still says the kernel's collective
  EXPECT_EQ(coll(3).in_nelems, kNone);                         // launched outside any annotation
  EXPECT_EQ(coll(4).in_nelems, 9);                             // its own metadata wins
  EXPECT_EQ(t.strings.view(coll(4).dtype), "Half");
  // The annotations keep no args of their own: only the four kernels have collectives.
  EXPECT_EQ(t.collectives.size(), 4u);
  for (const Event& e : t.events) {
    if (e.kind != EventKind::kKernel) {
      EXPECT_EQ(e.collective, kNoIndex);
    }
  }
}

TEST(TraceReader, EscapedStringsAreUnescapedOnce) {
  RankTrace t = parse_ok(
      trace_of({R"({"ph":"X","cat":"cpu_op","name":"say \"hi\" \\ [x] {y}","pid":1,"tid":1,"ts":1,"dur":1})",
                cpu_event("plain", "2", "1")}));
  ASSERT_EQ(t.events.size(), 2u);
  EXPECT_EQ(t.name_of(t.events[0]), "say \"hi\" \\ [x] {y}");
}

TEST(TraceReader, ManyEventsAcrossChunksAllArrive) {
  // Several MB, so the traceEvents array is parsed in more than one chunk;
  // names with quotes and brackets must not confuse the chunk boundaries.
  std::vector<std::string> events;
  const int n = 30000;
  for (int i = 0; i < n; ++i) {
    std::string name =
        "op_" + std::to_string(i) + (i % 7 == 0 ? R"( \"}],[{\" )" : "") + std::string(60, 'p');
    events.push_back(R"({"ph":"X","cat":"cpu_op","name":")" + name + R"(","pid":1,"tid":)" +
                     std::to_string(i % 3) + R"(,"ts":)" + std::to_string(i) +
                     R"(,"dur":1,"args":{"External id":)" + std::to_string(i) +
                     R"(,"Input Dims":[[1,2],[3]]}})");
    if (i % 5 == 0) events.push_back(R"({"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":1})");
  }
  std::string json = trace_of(events);
  ASSERT_GT(json.size(), 3u << 20);
  RankTrace t = parse_ok(json);
  ASSERT_EQ(t.events.size(), static_cast<size_t>(n));
  EXPECT_EQ(t.stats.events_total, n + n / 5);
  EXPECT_EQ(t.stats.error_count(), 0);
  int64_t ext_sum = 0;
  for (size_t i = 0; i < t.events.size(); ++i) {
    EXPECT_EQ(t.events[i].ts_ns, static_cast<int64_t>(i) * 1000);
    EXPECT_EQ(t.events[i].external_id, static_cast<int64_t>(i));
    ext_sum += t.events[i].external_id;
  }
  EXPECT_EQ(ext_sum, int64_t{n} * (n - 1) / 2);
  EXPECT_EQ(t.name_of(t.events[7]).substr(0, 11), "op_7 \"}],[{");
  EXPECT_EQ(t.lanes.size(), 3u);
}

// EMO_THREADS set for one scope.
class ScopedThreads {
 public:
  explicit ScopedThreads(const char* n) {
    const char* old = std::getenv("EMO_THREADS");
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv("EMO_THREADS", n, 1);
  }
  ~ScopedThreads() {
    if (had_) {
      setenv("EMO_THREADS", old_.c_str(), 1);
    } else {
      unsetenv("EMO_THREADS");
    }
  }

 private:
  bool had_ = false;
  std::string old_;
};

std::string stats_text(const RankTrace& t) {
  std::ostringstream os;
  os << t.stats.events_total << " " << t.stats.events_kept;
  for (const ImportStat& r : t.stats.rows) os << "\n" << r.what << " x" << r.count << ": " << r.example;
  return os.str();
}

TEST(TraceReader, ChunksWalkedOnSeveralThreadsGiveTheSameTables) {
  // Chunks are walked by several threads and handled in order: the tables, the counts and the
  // first examples must not depend on the thread count, nor on whether the separators between
  // events leave room for disjoint chunks (",\n" here, "," alone in `compact`).
  std::vector<std::string> events;
  for (int i = 0; i < 24000; ++i) {
    const std::string ts = std::to_string(i);
    events.push_back(R"({"ph":"X","cat":"cpu_op","name":"op_)" + std::to_string(i % 97) +
                     (i % 11 == 0 ? R"( \"q\" \\ )" : "") + std::string(80, 'x') + R"(","pid":1,"tid":)" +
                     std::to_string(i % 4) + R"(,"ts":)" + ts + R"(,"dur":1,"args":{"External id":)" + ts + "}}");
    if (i % 3 == 0)
      events.push_back(R"({"ph":"X","cat":"kernel","name":"k)" + std::to_string(i % 5) +
                       R"(","pid":0,"tid":7,"ts":)" + ts + R"(.5,"dur":0.25,"args":{"device":0,"stream":7,"correlation":)" +
                       ts + "}}");
    if (i == 5 || i == 20000) events.push_back(R"({"ph":"X","cat":"cpu_op","name":"no ts )" + ts + R"(","pid":1,"tid":1,"dur":1})");
    if (i == 9000 || i == 21000) events.push_back("[1, 2]");
  }
  const std::string json = trace_of(events);
  ASSERT_GT(json.size(), 4u << 20);
  std::string compact = "{\"traceEvents\":[";
  for (size_t i = 0; i < events.size(); ++i) compact += (i ? "," : "") + events[i];
  compact += "]}";

  std::vector<std::string> want_table;
  std::string want_stats;
  {
    ScopedThreads one("1");
    RankTrace t = parse_ok(json);
    want_table = table(t);
    want_stats = stats_text(t);
  }
  ASSERT_EQ(want_table.size(), 24000u + 8000u);
  EXPECT_NE(want_stats.find("event 8: "), std::string::npos) << want_stats;  // the first event without ts
  for (const char* n : {"1", "2", "4"}) {
    ScopedThreads threads(n);
    for (const std::string* text : std::vector<const std::string*>{&json, &compact}) {
      RankTrace t = parse_ok(*text);
      EXPECT_EQ(table(t), want_table) << "EMO_THREADS=" << n << (text == &compact ? ", compact" : "");
      EXPECT_EQ(stats_text(t), want_stats) << "EMO_THREADS=" << n << (text == &compact ? ", compact" : "");
    }
  }

  // Broken JSON late in the array: the same error whatever the thread count.
  std::string broken = json;
  const size_t at = broken.rfind("\"dur\":1,");
  ASSERT_NE(at, std::string::npos);
  broken.replace(at, 8, "\"dur\":1,,");
  std::string want_error;
  for (const char* n : {"1", "2", "4"}) {
    ScopedThreads threads(n);
    Result<RankTrace> r = parse_trace(broken, "test.json");
    ASSERT_FALSE(r.ok());
    if (want_error.empty()) want_error = r.error().message();
    EXPECT_EQ(r.error().message(), want_error) << "EMO_THREADS=" << n;
  }
  EXPECT_NE(want_error.find("not valid JSON"), std::string::npos) << want_error;
}

TEST(TraceReader, PythonFunctionsAreOptional) {
  std::string json = trace_of(
      {cpu_event("a", "1", "5"),
       R"({"ph":"X","cat":"python_function","name":"model.py(10): forward","pid":1,"tid":1,"ts":1,"dur":4})"});
  EXPECT_EQ(parse_ok(json).events.size(), 2u);
  ReadOptions no_python;
  no_python.keep_python_functions = false;
  RankTrace t = parse_ok(json, no_python);
  EXPECT_EQ(t.events.size(), 1u);
  const ImportStat* row = find_row(t, "python_function events not kept (ReadOptions)");
  ASSERT_NE(row, nullptr);
  EXPECT_FALSE(row->is_error);
}

TEST(TraceReader, UnknownCategoriesAreOtherCpuUnlessOnAGpu) {
  RankTrace t = parse_ok(trace_of({
      R"({"ph":"X","cat":"my_tool","name":"work","pid":1,"tid":1,"ts":1,"dur":4})",
      R"({"ph":"X","cat":"cpu_op","name":"op","pid":1,"tid":1,"ts":1,"dur":2})",
      // CUPTI range-profiler spans sit on the GPU's pid: not CPU work.
      R"({"ph":"X","cat":"cuda_profiler_range","name":"range","pid":0,"tid":0,"ts":2,"dur":4})",
      R"({"ph":"X","cat":"mtia_ccp_events","name":"event_wait","pid":17,"tid":3,"ts":2,"dur":4,"args":{"stream":108}})",
      R"({"ph":"X","cat":"overhead","name":"Buffer Flush","pid":-1,"tid":0,"ts":3,"dur":1})",
      R"({"name":"process_labels","ph":"M","ts":0,"pid":0,"tid":0,"args":{"labels":"GPU 0"}})",
  }));
  ASSERT_EQ(t.events.size(), 2u);
  EXPECT_EQ(t.events[0].kind, EventKind::kOtherCpu);
  EXPECT_EQ(t.name_of(t.events[0]), "work");
  EXPECT_EQ(t.lanes.size(), 1u);  // the dropped events leave no empty lanes behind
  EXPECT_NE(find_row(t, "events of unknown category on GPU processes skipped"), nullptr);
  EXPECT_NE(find_row(t, "events of unknown category on GPU streams skipped"), nullptr);
  EXPECT_NE(find_row(t, "profiler overhead spans skipped"), nullptr);
}

// ---- real traces -------------------------------------------------------------

TEST(TraceRealData, LegacyKinetoResnet50Counts) {
  EMO_REQUIRE_SHARED(
      path, "traces/kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143566756.pt.trace.json.gz");
  Result<RankTrace> r = read_trace(path);
  ASSERT_TRUE(r.ok()) << r.error().message();
  const RankTrace& t = *r;
  EXPECT_EQ(t.stats.events_total, 75718);
  EXPECT_EQ(t.stats.error_count(), 0);
  std::map<EventKind, int> kinds;
  for (const Event& e : t.events) ++kinds[e.kind];
  EXPECT_EQ(kinds[EventKind::kKernel], 8772);
  EXPECT_EQ(kinds[EventKind::kRuntime], 11923);
  EXPECT_EQ(kinds[EventKind::kMemset], 312);
  EXPECT_EQ(kinds[EventKind::kMemcpy], 12);
  // 23646 "Operator" events, of which the 6 ProfilerStep#N are annotations.
  EXPECT_EQ(kinds[EventKind::kCpuOp], 23640);
  EXPECT_EQ(kinds[EventKind::kUserAnnotation], 6);
  ASSERT_EQ(t.steps.size(), 6u);
  EXPECT_EQ(t.steps.front().number, 16);
  EXPECT_EQ(t.device_name, "Tesla V100-DGXS-32GB");
  for (const Event& e : t.events) {
    if (is_gpu_op(e.kind)) {
      ASSERT_EQ(e.stream, 7);
      ASSERT_NE(e.correlation, kNone);
    }
  }
}

TEST(TraceRealData, HtaRank0HasFiveProfilerSteps) {
  EMO_REQUIRE_SHARED(path, "traces/hta/tests/data/negative_queue_length_values_check/rank0.json.gz");
  Result<RankTrace> r = read_trace(path);
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->steps.size(), 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(r->steps[i].number, static_cast<int64_t>(550 + i));
  EXPECT_EQ(r->rank, 0);
  EXPECT_EQ(r->world_size, 16);
  EXPECT_EQ(r->stats.error_count(), 0);
}

TEST(TraceRealData, ParamDlrmWorker0IsRank0Of8) {
  EMO_REQUIRE_SHARED(path,
                     "traces/param/et_replay/tests/inputs/extracted/dlrm_kineto/"
                     "worker0_step_12.1694128201545.pt.trace.json");
  Result<RankTrace> r = read_trace(path);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->rank, 0);
  EXPECT_EQ(r->world_size, 8);
  EXPECT_EQ(r->stats.events_total, 3290);
  EXPECT_FALSE(r->collectives.empty());
}

TEST(TraceRealData, NcclDataKernelsHaveCollectiveArgs) {
  EMO_REQUIRE_SHARED(path, "traces/hta/tests/data/nccl_parser_config/nccl_data.json.gz");
  Result<RankTrace> r = read_trace(path);
  ASSERT_TRUE(r.ok()) << r.error().message();
  const RankTrace& t = *r;
  EXPECT_EQ(t.rank, 0);
  EXPECT_EQ(t.world_size, 2);
  int nccl_kernels = 0, with_meta = 0;
  for (const Event& e : t.events) {
    if (e.kind != EventKind::kKernel || t.name_of(e).substr(0, 4) != "nccl") continue;
    ++nccl_kernels;
    ASSERT_NE(e.collective, kNoIndex);
    const CollectiveArgs& c = t.collectives[e.collective];
    std::string_view coll = t.strings.view(c.collective);
    EXPECT_TRUE(coll == "allreduce" || coll == "broadcast") << coll;
    if (c.in_nelems > 0 && c.group_size == 2) ++with_meta;
  }
  EXPECT_EQ(nccl_kernels, 21);
  EXPECT_EQ(with_meta, 21);
  // baseTimeNanoseconds (after traceEvents) + relative fractional ts.
  EXPECT_GT(t.origin_ns, 1711964646000000000);
}

TEST(TraceRealData, HtaMemoryTimelineIsNotATrace) {
  EMO_REQUIRE_SHARED(path, "traces/hta/tests/data/memory_analysis/memory_timeline.raw.gz");
  Result<RankTrace> r = read_trace(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().where, path);
  EXPECT_NE(r.error().what.find("not a PyTorch profiler trace"), std::string::npos);
}

}  // namespace
}  // namespace emo::trace
