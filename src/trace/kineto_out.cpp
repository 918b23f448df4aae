// Writing a RankTrace's events back as Kineto JSON; see emo/trace/kineto_out.h.
#include "emo/trace/kineto_out.h"

namespace emo::trace {

const char* kineto_category(EventKind k) {
  switch (k) {
    case EventKind::kCpuOp: return "cpu_op";
    case EventKind::kUserAnnotation: return "user_annotation";
    case EventKind::kPythonFunction: return "python_function";
    case EventKind::kRuntime: return "cuda_runtime";
    case EventKind::kDriver: return "cuda_driver";
    case EventKind::kKernel: return "kernel";
    case EventKind::kMemcpy: return "gpu_memcpy";
    case EventKind::kMemset: return "gpu_memset";
    case EventKind::kCudaSync: return "cuda_sync";
    case EventKind::kGpuAnnotation: return "gpu_user_annotation";
    case EventKind::kOtherCpu: return "cpu_instant_event";
  }
  return "cpu_op";
}

void append_json_escaped(fmt::memory_buffer& b, std::string_view s) {
  for (char c : s) {
    switch (c) {
      case '"': b.append(std::string_view("\\\"")); break;
      case '\\': b.append(std::string_view("\\\\")); break;
      case '\n': b.append(std::string_view("\\n")); break;
      case '\t': b.append(std::string_view("\\t")); break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) fmt::format_to(std::back_inserter(b), "\\u{:04x}", int(c));
        else b.push_back(c);
    }
  }
}

void append_kineto_event(fmt::memory_buffer& b, const RankTrace& t, size_t i, int64_t ts, int64_t te,
                         std::string_view name, const IdOffsets& off) {
  const Event& e = t.events[i];
  const Lane& lane = t.lanes[e.lane];
  fmt::format_to(std::back_inserter(b), "{{\"ph\": \"X\", \"cat\": \"{}\", \"name\": \"", kineto_category(e.kind));
  append_json_escaped(b, name);
  fmt::format_to(std::back_inserter(b), "\", \"pid\": {}, \"tid\": {}, \"ts\": {:.3f}, \"dur\": {:.3f}, \"args\": {{",
                 lane.pid, lane.tid, double(ts) / 1e3, double(te - ts) / 1e3);
  bool arg = false;
  auto sep = [&] { if (arg) b.append(std::string_view(", ")); arg = true; };
  if (e.external_id != kNone) { sep(); fmt::format_to(std::back_inserter(b), "\"External id\": {}", e.external_id + off.external_id); }
  if (e.correlation != kNone) { sep(); fmt::format_to(std::back_inserter(b), "\"correlation\": {}", e.correlation + off.correlation); }
  if (lane.gpu) {
    sep(); fmt::format_to(std::back_inserter(b), "\"device\": {}, \"stream\": {}", e.device >= 0 ? e.device : lane.device,
                          e.stream >= 0 ? e.stream : lane.stream);
  }
  if (e.kind == EventKind::kCudaSync) {
    if (e.wait_on_stream >= 0) { sep(); fmt::format_to(std::back_inserter(b), "\"wait_on_stream\": {}", e.wait_on_stream); }
    if (e.wait_on_event_record_corr != kNone) {
      sep(); fmt::format_to(std::back_inserter(b), "\"wait_on_cuda_event_record_corr_id\": {}", e.wait_on_event_record_corr + off.correlation);
    }
  }
  if (e.collective != kNoIndex && e.collective < t.collectives.size()) {
    const CollectiveArgs& c = t.collectives[e.collective];
    sep(); b.append(std::string_view("\"Collective name\": \"")); append_json_escaped(b, t.strings.view(c.collective)); b.push_back('"');
    if (c.process_group != kEmptyStr) {
      b.append(std::string_view(", \"Process Group Name\": \"")); append_json_escaped(b, t.strings.view(c.process_group)); b.push_back('"');
    }
    if (c.seq != kNone) fmt::format_to(std::back_inserter(b), ", \"Seq\": {}", c.seq + off.seq);
    if (c.group_size > 0) fmt::format_to(std::back_inserter(b), ", \"Group size\": {}", c.group_size);
    if (c.in_nelems != kNone) fmt::format_to(std::back_inserter(b), ", \"In msg nelems\": {}", c.in_nelems);
    if (c.out_nelems != kNone) fmt::format_to(std::back_inserter(b), ", \"Out msg nelems\": {}", c.out_nelems);
    if (c.dtype != kEmptyStr) {
      b.append(std::string_view(", \"dtype\": \"")); append_json_escaped(b, t.strings.view(c.dtype)); b.push_back('"');
    }
  }
  b.append(std::string_view("}}"));
}

}  // namespace emo::trace
