// Writes one rank's trace in the modern Kineto JSON layout, event by event,
// into a memory buffer that is flushed to the output file in large chunks, so
// a file of millions of events never has to exist in memory at once. With
// formatting off it only counts events (used to size a trace before writing).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "emo/base/file_util.h"
#include "emo/base/result.h"

namespace emo::synth::detail {

// Where the text goes: a file (flushed in chunks), a string, or nowhere (count only).
class TraceSink {
 public:
  static TraceSink counting() { return TraceSink(nullptr, nullptr, false, 0); }
  static TraceSink to_string(std::string* out) { return TraceSink(nullptr, out, true, kDefaultChunk); }
  static TraceSink to_file(AtomicFile* file, size_t chunk_bytes = kDefaultChunk) {
    return TraceSink(file, nullptr, true, chunk_bytes);
  }

  bool formatting() const { return format_; }
  fmt::memory_buffer& buf() { return buf_; }
  // Flushes when the buffer is large; call after each event.
  void maybe_flush() {
    if (buf_.size() >= chunk_) flush();
  }
  void flush();
  const Status& status() const { return status_; }
  int64_t bytes() const { return bytes_ + static_cast<int64_t>(buf_.size()); }

 private:
  static constexpr size_t kDefaultChunk = size_t{4} << 20;
  TraceSink(AtomicFile* file, std::string* out, bool format, size_t chunk)
      : file_(file), out_(out), format_(format), chunk_(chunk) {}
  AtomicFile* file_;
  std::string* out_;
  bool format_;
  size_t chunk_;
  fmt::memory_buffer buf_;
  int64_t bytes_ = 0;
  Status status_;
};

// Collective metadata as PyTorch copies it onto record_param_comms and the NCCL kernel.
struct CollectiveMeta {
  std::string_view collective;  // "allreduce"
  int64_t nelems = 0;
  int group_size = 1;
  int64_t seq = 0;
  std::string_view ranks_text;  // "[0, 1]"
  std::string_view pg_name = "0";
  std::string_view pg_desc = "default_pg";
  int global_rank_start = 0;
};

// One entry of distributedInfo.pg_config.
struct PgConfig {
  std::string name;
  std::string desc;
  std::vector<int> ranks;
};

struct TraceHeader {
  int rank = 0;
  int world_size = 1;
  int num_devices = 1;
  std::string trace_name;
  uint64_t trace_id = 0;
  bool record_shapes = false;
  std::vector<PgConfig> groups;  // empty: the default group of all ranks only
};

// Times are nanoseconds from baseTimeNanoseconds; printed as µs with 3 decimals.
class KinetoWriter {
 public:
  KinetoWriter(TraceSink* sink, int64_t pid, int64_t tid, int device)
      : sink_(sink), pid_(pid), tid_(tid), device_(device) {}

  void header(const TraceHeader& h);
  // `name` and `args` are JSON-ready text (escaped; args without braces).
  void cpu_range(std::string_view cat, std::string_view name, int64_t ts, int64_t dur,
                 int64_t ext_id, int64_t ev_idx, std::string_view extra_args,
                 const CollectiveMeta* comms);
  void runtime(std::string_view name, int64_t ts, int64_t dur, int64_t ext_id, int cbid,
               int64_t corr);
  void kernel(std::string_view name, std::string_view launch_args, int64_t ts, int64_t dur,
              int64_t ext_id, int stream, int64_t corr, const CollectiveMeta* comms);
  void memcpy(std::string_view name, int64_t ts, int64_t dur, int64_t ext_id, int stream,
              int64_t corr, int64_t bytes);
  void memset(int64_t ts, int64_t dur, int64_t ext_id, int stream, int64_t corr, int64_t bytes);
  // cuda_sync record. wait_stream/wait_corr/event_id < 0 leave the wait fields out
  // (Stream Sync, Context Sync); tid and stream -1 are written as such.
  void sync(std::string_view kind, int64_t ts, int64_t dur, int64_t ext_id, int stream,
            int64_t corr, int wait_stream, int64_t wait_corr, int64_t event_id);
  void flow_start(int64_t id, int64_t ts);                   // on this CPU thread
  void flow_finish(int64_t id, int64_t ts, int gpu_tid);     // on the GPU lane
  // Process/thread metadata, the profiler span and instants, the closing keys.
  void footer(const std::vector<int>& streams, int64_t span_begin, int64_t span_end,
              std::string_view trace_name);

  int64_t events() const { return events_; }

 private:
  void open_event();
  void close_event() {
    ++events_;
    sink_->maybe_flush();
  }
  TraceSink* sink_;
  int64_t pid_, tid_;
  int device_;
  int64_t events_ = 0;
  bool first_ = true;
};

// "a\"b" -> "a\\\"b": JSON string body (without quotes).
std::string json_escape(std::string_view s);

// 1.5 -> "1.5": shortest round-trip form of a double, always with a decimal point.
std::string json_number(double v);

inline constexpr int64_t kBaseTimeNanoseconds = 1735689600000000000;  // 2025-01-01T00:00:00Z

}  // namespace emo::synth::detail
