// A RankTrace as bytes (trace/trace.h, to_wire/from_wire): how the processes of an MPI run hand the
// rank traces they read to the process that assembles the step (include/emo/dist/dist.h). Same binary on
// both ends: the plain tables travel as their bytes, the strings in id order (interning them in that
// order gives the same ids back).
#include <array>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "emo/trace/trace.h"

namespace emo::trace {

namespace {

constexpr char kMagic[4] = {'E', 'M', 'O', 'W'};
constexpr uint32_t kVersion = 5;

class Writer {
 public:
  template <class T>
  void pod(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void str(std::string_view s) {
    pod(static_cast<uint64_t>(s.size()));
    out_.append(s.data(), s.size());
  }
  template <class T>
  void vec(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    pod(static_cast<uint64_t>(v.size()));
    if (!v.empty()) out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool ok() const { return ok_; }
  template <class T>
  T pod() {
    T v{};
    if (!take(sizeof(T))) return v;
    std::memcpy(&v, in_.data() + at_ - sizeof(T), sizeof(T));
    return v;
  }
  std::string_view str() {
    const auto n = pod<uint64_t>();
    if (!ok_ || !take(n)) return {};
    return in_.substr(at_ - n, n);
  }
  template <class T>
  void vec(std::vector<T>& v) {
    const auto n = pod<uint64_t>();
    if (!ok_ || n > (in_.size() - at_) / sizeof(T)) {
      ok_ = false;
      return;
    }
    v.resize(n);
    if (n > 0) std::memcpy(v.data(), in_.data() + at_, n * sizeof(T));
    at_ += n * sizeof(T);
  }
  bool at_end() const { return at_ == in_.size(); }

 private:
  bool take(uint64_t n) {
    if (!ok_ || n > in_.size() - at_) return ok_ = false;
    at_ += n;
    return true;
  }
  std::string_view in_;
  size_t at_ = 0;
  bool ok_ = true;
};

}  // namespace

std::string to_wire(const RankTrace& t) {
  Writer w;
  w.pod(kMagic);
  w.pod(kVersion);
  w.str(t.path);
  w.pod(static_cast<int32_t>(t.rank));
  w.pod(static_cast<int32_t>(t.world_size));
  w.pod(t.origin_ns);
  w.str(t.device_name);
  w.vec(t.untraced_step_ns);
  w.pod(static_cast<uint64_t>(t.strings.size()));
  for (size_t i = 1; i < t.strings.size(); ++i) w.str(t.strings.view(static_cast<StrId>(i)));
  w.vec(t.lanes);
  w.vec(t.events);
  w.vec(t.collectives);
  w.vec(t.steps);
  w.pod(static_cast<uint8_t>(t.window.has_value()));
  w.pod(t.window.value_or(ProfilerWindow{}));
  w.vec(t.prior_gpu_busy);
  w.pod(static_cast<uint64_t>(t.stats.rows.size()));
  for (const ImportStat& r : t.stats.rows) {
    w.str(r.what);
    w.pod(r.count);
    w.str(r.example);
    w.pod(static_cast<uint8_t>(r.is_error));
  }
  w.pod(t.stats.events_total);
  w.pod(t.stats.events_kept);
  w.pod(t.stats.outside_profiler_window);
  w.str(t.stats.outside_profiler_window_example);
  return w.take();
}

Result<RankTrace> from_wire(std::string_view bytes) {
  Reader r(bytes);
  RankTrace t;
  const auto magic = r.pod<std::array<char, 4>>();
  const auto version = r.pod<uint32_t>();
  if (!r.ok() || std::memcmp(magic.data(), kMagic, 4) != 0 || version != kVersion)
    return make_error("", "a rank trace from another process is not in this build's format",
                      "run the same emo binary on every process");
  t.path = std::string(r.str());
  t.rank = r.pod<int32_t>();
  t.world_size = r.pod<int32_t>();
  t.origin_ns = r.pod<int64_t>();
  t.device_name = std::string(r.str());
  r.vec(t.untraced_step_ns);
  const auto strings = r.pod<uint64_t>();
  for (uint64_t i = 1; r.ok() && i < strings; ++i) {
    if (t.strings.intern(r.str()) != i) return make_error(t.path, "a rank trace from another process has repeated strings");
  }
  r.vec(t.lanes);
  r.vec(t.events);
  r.vec(t.collectives);
  r.vec(t.steps);
  const auto has_window = r.pod<uint8_t>();
  const auto window = r.pod<ProfilerWindow>();
  if (has_window > 1) return make_error(t.path, "a rank trace from another process arrived cut short or corrupt");
  if (has_window == 1) t.window = window;
  r.vec(t.prior_gpu_busy);
  const auto rows = r.pod<uint64_t>();
  for (uint64_t i = 0; r.ok() && i < rows; ++i) {
    ImportStat s;
    s.what = std::string(r.str());
    s.count = r.pod<int64_t>();
    s.example = std::string(r.str());
    const auto is_error = r.pod<uint8_t>();
    if (is_error > 1) return make_error(t.path, "a rank trace from another process arrived cut short or corrupt");
    s.is_error = is_error == 1;
    t.stats.rows.push_back(std::move(s));
  }
  t.stats.events_total = r.pod<int64_t>();
  t.stats.events_kept = r.pod<int64_t>();
  t.stats.outside_profiler_window = r.pod<int64_t>();
  t.stats.outside_profiler_window_example = std::string(r.str());
  if (!r.ok() || !r.at_end()) return make_error(t.path, "a rank trace from another process arrived cut short or corrupt");
  // The tables' indices must hold in this process too (lanes, names, collectives).
  for (const Event& e : t.events) {
    if (static_cast<uint8_t>(e.kind) > static_cast<uint8_t>(EventKind::kOtherCpu) ||
        static_cast<uint8_t>(e.sync) > static_cast<uint8_t>(SyncKind::kOther))
      return make_error(t.path, "a rank trace from another process has an event of no known kind");
    if (e.name >= t.strings.size() || (e.lane != kNoIndex && e.lane >= t.lanes.size()) ||
        (e.collective != kNoIndex && e.collective >= t.collectives.size()))
      return make_error(t.path, "a rank trace from another process has an index out of its tables");
  }
  const auto n = t.strings.size();
  // A bool is read only once its byte is known to be 0 or 1.
  const auto bool_byte = [](const void* object, size_t offset) {
    uint8_t b = 0;
    std::memcpy(&b, static_cast<const char*>(object) + offset, 1);
    return b;
  };
  for (const Lane& l : t.lanes) {
    if (bool_byte(&l, offsetof(Lane, gpu)) > 1)
      return make_error(t.path, "a rank trace from another process arrived cut short or corrupt");
  }
  for (const CollectiveArgs& c : t.collectives) {
    if (bool_byte(&c, offsetof(CollectiveArgs, matchable)) > 1)
      return make_error(t.path, "a rank trace from another process arrived cut short or corrupt");
  }
  for (const Lane& l : t.lanes) {
    if (l.name >= n) return make_error(t.path, "a rank trace from another process has an index out of its tables");
  }
  for (const CollectiveArgs& c : t.collectives) {
    if (c.collective >= n || c.process_group >= n || c.dtype >= n)
      return make_error(t.path, "a rank trace from another process has an index out of its tables");
  }
  return t;
}

}  // namespace emo::trace
