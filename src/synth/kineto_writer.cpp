// Kineto JSON text, laid out as libkineto's ChromeTraceLogger writes it
// (two-space event blocks, "ts"/"dur" in µs with three decimals, the closing
// traceName / displayTimeUnit / baseTimeNanoseconds keys after traceEvents), so
// the files diff and parse like those of a real PyTorch 2.x run.
#include "kineto_writer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>

namespace emo::synth::detail {
namespace {

// One H100 SXM as cudaGetDeviceProperties reports it.
constexpr std::string_view kDeviceTail =
    R"(, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85031714816,
      "computeMajor": 9, "computeMinor": 0,
      "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
      "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, "warpSize": 32,
      "sharedMemPerBlock": 49152, "sharedMemPerMultiprocessor": 233472,
      "numSms": 132, "sharedMemPerBlockOptin": 232448
    })";

// ns -> "12.345" (µs with three decimals; times here are never negative).
struct Us {
  int64_t ns;
};

}  // namespace
}  // namespace emo::synth::detail

template <>
struct fmt::formatter<emo::synth::detail::Us> {
  constexpr auto parse(format_parse_context& ctx) { return ctx.begin(); }
  template <class Ctx>
  auto format(const emo::synth::detail::Us& t, Ctx& ctx) const {
    // Hand-rolled: this runs a few million times for a large trace.
    char tmp[32];
    int64_t v = t.ns < 0 ? -t.ns : t.ns;
    int n = 0;
    int64_t frac = v % 1000, whole = v / 1000;
    tmp[n++] = static_cast<char>('0' + frac % 10);
    tmp[n++] = static_cast<char>('0' + (frac / 10) % 10);
    tmp[n++] = static_cast<char>('0' + frac / 100);
    tmp[n++] = '.';
    do {
      tmp[n++] = static_cast<char>('0' + whole % 10);
      whole /= 10;
    } while (whole);
    if (t.ns < 0) tmp[n++] = '-';
    auto out = ctx.out();
    while (n) *out++ = tmp[--n];
    return out;
  }
};

namespace emo::synth::detail {

void TraceSink::flush() {
  if (buf_.size() == 0) return;
  if (out_) {
    out_->append(buf_.data(), buf_.size());
  } else if (file_ && status_.ok()) {
    status_ = file_->write(std::string_view(buf_.data(), buf_.size()));
  }
  bytes_ += static_cast<int64_t>(buf_.size());
  buf_.clear();
}

std::string json_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(static_cast<unsigned char>(c)));
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string json_number(double v) {
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

void KinetoWriter::open_event() {
  auto& b = sink_->buf();
  if (first_) {
    b.append(std::string_view("\n  {"));
    first_ = false;
  } else {
    b.append(std::string_view(",\n  {"));
  }
}

void KinetoWriter::header(const TraceHeader& h) {
  if (!sink_->formatting()) return;
  auto out = fmt::appender(sink_->buf());
  fmt::format_to(out, "{{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [");
  for (int d = 0; d < h.num_devices; ++d) {
    fmt::format_to(out, "{}\n    {{\n      \"id\": {}{}", d ? "," : "", d, kDeviceTail);
  }
  fmt::format_to(out, "\n  ],\n");
  fmt::format_to(out, "  \"cupti_version\": 24,\n  \"cuda_runtime_version\": 12040,\n"
                      "  \"cuda_driver_version\": 12040,\n");
  std::vector<PgConfig> groups = h.groups;
  if (groups.empty()) {
    groups.push_back(PgConfig{"0", "default_pg", {}});
    for (int r = 0; r < h.world_size; ++r) groups.back().ranks.push_back(r);
  }
  fmt::format_to(out, "  \"distributedInfo\": {{\"backend\": \"nccl\", \"rank\": {}, \"world_size\": {}, "
                      "\"pg_count\": {}, \"pg_config\": [",
                 h.rank, h.world_size, groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    fmt::format_to(out,
                   "{}{{\"pg_name\": \"{}\", \"pg_desc\": \"{}\", \"backend_config\": \"cuda:nccl\", "
                   "\"pg_size\": {}, \"ranks\": [{}]}}",
                   g ? ", " : "", json_escape(groups[g].name), json_escape(groups[g].desc),
                   groups[g].ranks.size(), fmt::join(groups[g].ranks, ", "));
  }
  fmt::format_to(out, "], \"nccl_version\": \"2.21.5\"}},\n");
  fmt::format_to(out,
                 "  \"record_shapes\": {},\n  \"profile_memory\": 0,\n  \"with_stack\": 0,\n"
                 "  \"with_flops\": 0,\n  \"with_modules\": 0,\n  \"trace_id\": \"{:016X}{:016X}\",\n"
                 "  \"traceEvents\": [",
                 h.record_shapes ? 1 : 0, h.trace_id, h.trace_id ^ 0x9E3779B97F4A7C15ull);
}

void KinetoWriter::cpu_range(std::string_view cat, std::string_view name, int64_t ts,
                             int64_t dur, int64_t ext_id, int64_t ev_idx,
                             std::string_view extra_args, const CollectiveMeta* comms) {
  if (sink_->formatting()) {
    open_event();
    auto out = fmt::appender(sink_->buf());
    fmt::format_to(out,
                   "\n    \"ph\": \"X\", \"cat\": \"{}\", \"name\": \"{}\", \"pid\": {}, \"tid\": {},"
                   "\n    \"ts\": {}, \"dur\": {},\n    \"args\": {{\n      \"External id\": {},"
                   "\"Record function id\": 0, ",
                   cat, name, pid_, tid_, Us{ts}, Us{dur}, ext_id);
    if (comms) {
      fmt::format_to(out,
                     "\"Process Group Name\": \"{}\", \"Process Group Description\": \"{}\", "
                     "\"Process Group Ranks\": \"{}\", \"Group size\": {}, \"Global rank start\": {}, "
                     "\"Global rank stride\": 1, \"Seq\": {}, \"In msg nelems\": {}, "
                     "\"Out msg nelems\": {}, \"In split size\": \"[]\", \"Out split size\": \"[]\", "
                     "\"dtype\": \"BFloat16\", \"Collective name\": \"{}\", ",
                     comms->pg_name, comms->pg_desc, comms->ranks_text, comms->group_size,
                     comms->global_rank_start, comms->seq, comms->nelems, comms->nelems, comms->collective);
    }
    if (!extra_args.empty()) {
      sink_->buf().append(extra_args);
      sink_->buf().append(std::string_view(", "));
    }
    fmt::format_to(out, "\"Ev Idx\": {}\n    }}\n  }}", ev_idx);
  }
  close_event();
}

void KinetoWriter::runtime(std::string_view name, int64_t ts, int64_t dur, int64_t ext_id,
                           int cbid, int64_t corr) {
  if (sink_->formatting()) {
    open_event();
    fmt::format_to(fmt::appender(sink_->buf()),
                   "\n    \"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"{}\", \"pid\": {}, "
                   "\"tid\": {},\n    \"ts\": {}, \"dur\": {},\n    \"args\": {{\n      "
                   "\"External id\": {},      \"cbid\": {}, \"correlation\": {}\n    }}\n  }}",
                   name, pid_, tid_, Us{ts}, Us{dur}, ext_id, cbid, corr);
  }
  close_event();
}

void KinetoWriter::kernel(std::string_view name, std::string_view launch_args, int64_t ts,
                          int64_t dur, int64_t ext_id, int stream, int64_t corr,
                          const CollectiveMeta* comms) {
  if (sink_->formatting()) {
    open_event();
    auto out = fmt::appender(sink_->buf());
    fmt::format_to(out,
                   "\n    \"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"{}\", \"pid\": {}, "
                   "\"tid\": {},\n    \"ts\": {}, \"dur\": {},\n    \"args\": {{\n      "
                   "\"External id\": {},      \"queued\": 0, \"device\": {}, \"context\": 1,      "
                   "\"stream\": {}, \"correlation\": {},      {}",
                   name, device_, stream, Us{ts}, Us{dur}, ext_id, device_, stream, corr,
                   launch_args);
    if (comms) {
      fmt::format_to(out,
                     ", \"Collective name\": \"{}\", \"In msg nelems\": {}, \"Out msg nelems\": {}, "
                     "\"Group size\": {}, \"dtype\": \"BFloat16\", \"In split size\": \"[]\", "
                     "\"Out split size\": \"[]\", \"Process Group Name\": \"{}\", "
                     "\"Process Group Description\": \"{}\", \"Process Group Ranks\": \"{}\", "
                     "\"Seq\": {}",
                     comms->collective, comms->nelems, comms->nelems, comms->group_size, comms->pg_name,
                     comms->pg_desc, comms->ranks_text, comms->seq);
    }
    sink_->buf().append(std::string_view("\n    }\n  }"));
  }
  close_event();
}

void KinetoWriter::memcpy(std::string_view name, int64_t ts, int64_t dur, int64_t ext_id,
                          int stream, int64_t corr, int64_t bytes) {
  if (sink_->formatting()) {
    open_event();
    double gbps = dur > 0 ? static_cast<double>(bytes) / static_cast<double>(dur) : 0.0;
    fmt::format_to(fmt::appender(sink_->buf()),
                   "\n    \"ph\": \"X\", \"cat\": \"gpu_memcpy\", \"name\": \"{}\", \"pid\": {}, "
                   "\"tid\": {},\n    \"ts\": {}, \"dur\": {},\n    \"args\": {{\n      "
                   "\"External id\": {},      \"device\": {}, \"context\": 1,      \"stream\": {}, "
                   "\"correlation\": {},      \"bytes\": {}, \"memory bandwidth (GB/s)\": {}\n    }}\n  }}",
                   name, device_, stream, Us{ts}, Us{dur}, ext_id, device_, stream, corr, bytes,
                   json_number(gbps));
  }
  close_event();
}

void KinetoWriter::memset(int64_t ts, int64_t dur, int64_t ext_id, int stream, int64_t corr,
                          int64_t bytes) {
  if (sink_->formatting()) {
    open_event();
    double gbps = dur > 0 ? static_cast<double>(bytes) / static_cast<double>(dur) : 0.0;
    fmt::format_to(fmt::appender(sink_->buf()),
                   "\n    \"ph\": \"X\", \"cat\": \"gpu_memset\", \"name\": \"Memset (Device)\", "
                   "\"pid\": {}, \"tid\": {},\n    \"ts\": {}, \"dur\": {},\n    \"args\": {{\n      "
                   "\"External id\": {},      \"device\": {}, \"context\": 1,      \"stream\": {}, "
                   "\"correlation\": {},      \"bytes\": {}, \"memory bandwidth (GB/s)\": {}\n    }}\n  }}",
                   device_, stream, Us{ts}, Us{dur}, ext_id, device_, stream, corr, bytes,
                   json_number(gbps));
  }
  close_event();
}

void KinetoWriter::sync(std::string_view kind, int64_t ts, int64_t dur, int64_t ext_id,
                        int stream, int64_t corr, int wait_stream, int64_t wait_corr,
                        int64_t event_id) {
  if (sink_->formatting()) {
    open_event();
    auto out = fmt::appender(sink_->buf());
    fmt::format_to(out,
                   "\n    \"ph\": \"X\", \"cat\": \"cuda_sync\", \"name\": \"{}\", \"pid\": {}, "
                   "\"tid\": {},\n    \"ts\": {}, \"dur\": {},\n    \"args\": {{\n      "
                   "\"External id\": {},      \"cuda_sync_kind\": \"{}\", ",
                   kind, device_, stream, Us{ts}, Us{dur}, ext_id, kind);
    if (event_id >= 0) {
      fmt::format_to(out,
                     "\"wait_on_stream\": {}, \"wait_on_cuda_event_record_corr_id\": {}, "
                     "\"wait_on_cuda_event_id\": {},      ",
                     wait_stream, wait_corr, event_id);
    }
    fmt::format_to(out,
                   "\"stream\": {}, \"correlation\": {},      \"device\": {}, \"context\": 1\n    }}\n  }}",
                   stream, corr, device_);
  }
  close_event();
}

void KinetoWriter::flow_start(int64_t id, int64_t ts) {
  if (sink_->formatting()) {
    open_event();
    fmt::format_to(fmt::appender(sink_->buf()),
                   "\n    \"ph\": \"s\", \"id\": {}, \"pid\": {}, \"tid\": {}, \"ts\": {},\n"
                   "    \"cat\": \"ac2g\", \"name\": \"ac2g\"\n  }}",
                   id, pid_, tid_, Us{ts});
  }
  close_event();
}

void KinetoWriter::flow_finish(int64_t id, int64_t ts, int gpu_tid) {
  if (sink_->formatting()) {
    open_event();
    fmt::format_to(fmt::appender(sink_->buf()),
                   "\n    \"ph\": \"f\", \"id\": {}, \"pid\": {}, \"tid\": {}, \"ts\": {},\n"
                   "    \"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"\n  }}",
                   id, device_, gpu_tid, Us{ts});
  }
  close_event();
}

void KinetoWriter::footer(const std::vector<int>& streams, int64_t span_begin, int64_t span_end,
                          std::string_view trace_name) {
  const bool fmt_on = sink_->formatting();
  auto meta = [&](std::string_view name, std::string_view pid, int64_t tid, std::string_view args) {
    if (fmt_on) {
      open_event();
      fmt::format_to(fmt::appender(sink_->buf()),
                     "\n    \"name\": \"{}\", \"ph\": \"M\", \"ts\": {}, \"pid\": {}, \"tid\": {},\n"
                     "    \"args\": {{\n      {}\n    }}\n  }}",
                     name, Us{span_begin}, pid, tid, args);
    }
    close_event();
  };
  const std::string cpu_pid = fmt::format("{}", pid_);
  const std::string gpu_pid = fmt::format("{}", device_);
  meta("process_name", cpu_pid, 0, "\"name\": \"python3\"");
  meta("process_labels", cpu_pid, 0, "\"labels\": \"CPU\"");
  meta("process_sort_index", cpu_pid, 0, fmt::format("\"sort_index\": {}", pid_));
  meta("process_name", gpu_pid, 0, "\"name\": \"python3\"");
  meta("process_labels", gpu_pid, 0, fmt::format("\"labels\": \"GPU {}\"", device_));
  meta("process_sort_index", gpu_pid, 0, fmt::format("\"sort_index\": {}", 16777216 + device_));
  for (int s : streams) {
    meta("thread_name", gpu_pid, s, fmt::format("\"name\": \"stream {} \"", s));
    meta("thread_sort_index", gpu_pid, s, fmt::format("\"sort_index\": {}", s));
  }
  meta("thread_name", cpu_pid, tid_, fmt::format("\"name\": \"thread {} (pt_main_thread)\"", tid_));
  meta("thread_sort_index", cpu_pid, tid_, fmt::format("\"sort_index\": {}", tid_));
  if (fmt_on) {
    open_event();
    fmt::format_to(fmt::appender(sink_->buf()),
                   "\n    \"ph\": \"X\", \"cat\": \"Trace\", \"ts\": {}, \"dur\": {},\n"
                   "    \"pid\": \"Spans\", \"tid\": \"PyTorch Profiler\",\n"
                   "    \"name\": \"PyTorch Profiler (0)\",\n    \"args\": {{\n"
                   "      \"Op count\": 0\n    }}\n  }}",
                   Us{span_begin}, Us{span_end - span_begin});
  }
  close_event();
  meta("process_sort_index", "\"Spans\"", 0, "\"sort_index\": 536870912");
  if (fmt_on) {
    open_event();
    fmt::format_to(fmt::appender(sink_->buf()),
                   "\n    \"name\": \"Iteration Start: PyTorch Profiler\", \"ph\": \"i\", \"s\": \"g\",\n"
                   "    \"pid\": \"Traces\", \"tid\": \"Trace PyTorch Profiler\", \"ts\": {}\n  }}",
                   Us{span_begin});
  }
  close_event();
  if (fmt_on) {
    open_event();
    fmt::format_to(fmt::appender(sink_->buf()),
                   "\n    \"name\": \"Record Window End\", \"ph\": \"i\", \"s\": \"g\",\n"
                   "    \"pid\": \"\", \"tid\": \"\", \"ts\": {}\n  }}",
                   Us{span_end});
  }
  close_event();
  if (fmt_on) {
    fmt::format_to(fmt::appender(sink_->buf()),
                   "\n],\n  \"traceName\": \"{}\",\n  \"displayTimeUnit\": \"ms\",\n"
                   "  \"baseTimeNanoseconds\": {}\n}}\n",
                   trace_name, kBaseTimeNanoseconds);
  }
  sink_->flush();
}

}  // namespace emo::synth::detail
