// A stand-in for NVIDIA's libnvidia-ml.so.1, built by the tests (tests/nvml_standin/CMakeLists.txt) as
// ${CMAKE_BINARY_DIR}/tests/nvml_standin/libnvidia-ml.so.1 (soname libnvidia-ml.so.1). A process that
// finds it first on LD_LIBRARY_PATH dlopens it instead of the driver's, so the NVML backend
// (src/device/nvml.cpp), ClockGuard, a clock daemon or the runtime run their real code paths without a
// GPU. It exports every entry point nvml.cpp binds, with NVML's C signatures and return codes (no NVIDIA
// header: the types are declared here, as nvml.cpp does), plus emo_nvml_standin_init_count().
//
// Environment, read again at every call (a test may change it between calls):
//   EMO_NVML_STANDIN_STATE=FILE   the GPUs' state lives in FILE, shared by every process that names it;
//                                 each call reads, changes and writes it back under flock(2). Created on
//                                 first use; an empty or unreadable file is a fresh state. Without the
//                                 variable the state is this process's memory.
//   EMO_NVML_STANDIN_GPUS=N       how many GPUs (default 1, at most 64).
//   EMO_NVML_STANDIN_NAME=NAME    the product name of every GPU (default "NVIDIA H100 80GB HBM3").
//   EMO_NVML_STANDIN_LOG=FILE     one line appended per call: `<pid> <function> <args...> <rc>`; args are
//                                 the call's inputs in C order, a device as its index ('?' when the
//                                 handle is not one of ours), array queries with the count passed in;
//                                 e.g. `4242 nvmlDeviceSetGpuLockedClocks 0 1410 1410 0`. nvmlErrorString
//                                 logs its argument and 0.
//   EMO_NVML_STANDIN_FAIL=SPEC    SPEC = func[:count[:perm]][,func2[:count[:perm]]...] (also func:perm):
//                                 `func` returns NVML_ERROR_UNKNOWN (999), or NVML_ERROR_NO_PERMISSION (4)
//                                 with `perm`, for its first `count` calls (default: every call), changing
//                                 nothing. The counts live in the state file when there is one (so they
//                                 span processes) and start again whenever the variable's value differs
//                                 from the one they were counted under (unsetting it counts as a value).
//   EMO_NVML_STANDIN_LATENCY_MS=X every call first sleeps X ms (X may be fractional).
//
// The GPUs:
//   - supported memory clocks: 2619 MHz only; supported graphics (SM) clocks at 2619: 1980 down to 345 MHz
//     in 15 MHz steps, descending as NVML lists them (the h100 built-in profile's table). Another memory
//     clock -> NVML_ERROR_NOT_FOUND (6). Array queries follow NVML: when *count is smaller than the list,
//     *count is set to the size needed and the call returns NVML_ERROR_INSUFFICIENT_SIZE (7).
//   - nvmlDeviceSetGpuLockedClocks(dev, min, max): both must be supported clocks with min <= max, else
//     NVML_ERROR_INVALID_ARGUMENT (2). The clock in effect is then max; nvmlDeviceResetGpuLockedClocks
//     goes back to the default policy (1980 MHz). nvmlDeviceGetClockInfo(SM or graphics) returns the clock
//     in effect, (memory) 2619.
//   - the energy counter (nvmlDeviceGetTotalEnergyConsumption, mJ) is monotone and grows with
//     CLOCK_MONOTONIC time at 90 W + 310 W * (f / 1980)^2, f the clock in effect (400 W at the default),
//     from the moment the GPU's state was created; a clock change applies from the call that made it.
//   - throttle reasons: none (0).
//   - a bad index or handle -> NVML_ERROR_INVALID_ARGUMENT (2). Device calls before nvmlInit_v2 (or after
//     the matching nvmlShutdown) -> NVML_ERROR_UNINITIALIZED (1); init is counted per process, as in NVML.
//
// The state file (text; a test may read it, or write one by hand, e.g. `gpu 0 locked_mhz 1200` to stand
// for a lock some earlier process left behind; missing keys take their defaults):
//   emo-nvml-standin-state 1 clock CLOCK_MONOTONIC
//   gpu 0 locked_mhz 1410 min_mhz 1410 energy_uj 123456789 t_ns 987654321   (locked_mhz 0 = default policy;
//                                 energy in microjoules up to t_ns, the CLOCK_MONOTONIC time of the last call)
//   fail_spec nvmlDeviceResetGpuLockedClocks:1      (the EMO_NVML_STANDIN_FAIL the counts are under; - = none)
//   failed nvmlDeviceResetGpuLockedClocks 1         (failures injected so far, per function)
//   end
// It is rewritten in place (content, then truncation), so a process killed mid-write leaves a file whose
// text up to `end` is whole.
//
// A call made while this thread is already inside one (a signal handler that resets the clock, e.g.
// ClockGuard's) takes no lock, so that it cannot deadlock on the call it interrupted.
#include <fcntl.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

// ---- NVML's C API, as far as EMO uses it (values from NVML's API reference) ------------------------

struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;
using nvmlReturn_t = int;

namespace {

constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr nvmlReturn_t NVML_ERROR_UNINITIALIZED = 1;
constexpr nvmlReturn_t NVML_ERROR_INVALID_ARGUMENT = 2;
constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
constexpr nvmlReturn_t NVML_ERROR_NO_PERMISSION = 4;
constexpr nvmlReturn_t NVML_ERROR_NOT_FOUND = 6;
constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
constexpr nvmlReturn_t NVML_ERROR_UNKNOWN = 999;
constexpr int NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2, NVML_CLOCK_VIDEO = 3;

constexpr unsigned kMaxGpus = 64;
constexpr unsigned kMemClockMhz = 2619;
constexpr unsigned kMaxSmMhz = 1980, kMinSmMhz = 345, kStepMhz = 15;
constexpr unsigned kVideoMhz = 1755;
constexpr const char* kDefaultName = "NVIDIA H100 80GB HBM3";

// The handles: addresses inside this array, one byte per GPU.
char g_handles[kMaxGpus];

std::mutex g_mu;        // the in-process state and the init count
int g_init_count = 0;   // NVML counts nvmlInit_v2 / nvmlShutdown per process
thread_local int g_depth = 0;

struct Gpu {
  unsigned locked_mhz = 0;  // 0 = default policy
  unsigned min_mhz = 0;
  uint64_t energy_uj = 0;
  int64_t t_ns = 0;  // 0 = not started yet
};

struct State {
  std::vector<Gpu> gpus;
  std::string fail_spec;                  // the EMO_NVML_STANDIN_FAIL value the counts are under
  std::map<std::string, long> failed;     // failures injected so far
};

State g_memory;  // the state when EMO_NVML_STANDIN_STATE is unset

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

int64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

unsigned gpu_count() {
  const char* v = env("EMO_NVML_STANDIN_GPUS");
  if (!v) return 1;
  long n = std::strtol(v, nullptr, 10);
  if (n < 0) return 0;
  return n > long(kMaxGpus) ? kMaxGpus : unsigned(n);
}

std::string product_name() {
  const char* v = env("EMO_NVML_STANDIN_NAME");
  return v ? v : kDefaultName;
}

// Supported SM clocks, descending.
std::vector<unsigned> sm_clocks() {
  std::vector<unsigned> out;
  for (unsigned f = kMaxSmMhz; f >= kMinSmMhz; f -= kStepMhz) out.push_back(f);
  return out;
}

bool supported_sm(unsigned f) { return f >= kMinSmMhz && f <= kMaxSmMhz && (kMaxSmMhz - f) % kStepMhz == 0; }

unsigned effective_mhz(const Gpu& g) { return g.locked_mhz ? g.locked_mhz : kMaxSmMhz; }

double power_w(unsigned mhz) {
  double x = double(mhz) / double(kMaxSmMhz);
  return 90.0 + 310.0 * x * x;
}

// Brings every GPU's energy up to `now` at the clock in effect so far.
void advance(State& s, int64_t now) {
  for (Gpu& g : s.gpus) {
    if (g.t_ns == 0 || now < g.t_ns) {  // new, or the clock went backwards (a file from an earlier boot)
      g.t_ns = now;
      continue;
    }
    double uj = power_w(effective_mhz(g)) * double(now - g.t_ns) / 1e3;  // W * ns = nJ
    g.energy_uj += uint64_t(std::llround(uj));
    g.t_ns = now;
  }
}

// ---- the state file -------------------------------------------------------------------------------

State parse_state(const std::string& text) {
  State s;
  std::istringstream in(text);
  std::string line;
  bool header = false;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string key;
    if (!(ls >> key)) continue;
    if (!header) {
      if (key != "emo-nvml-standin-state") return State{};  // not ours, or torn: a fresh state
      header = true;
      continue;
    }
    if (key == "end") break;
    if (key == "gpu") {
      long idx = -1;
      if (!(ls >> idx) || idx < 0 || idx >= long(kMaxGpus)) continue;
      if (s.gpus.size() <= size_t(idx)) s.gpus.resize(size_t(idx) + 1);
      Gpu& g = s.gpus[size_t(idx)];
      bool have_min = false;
      std::string k;
      while (ls >> k) {
        if (k == "locked_mhz") {
          ls >> g.locked_mhz;
        } else if (k == "min_mhz") {
          ls >> g.min_mhz;
          have_min = true;
        } else if (k == "energy_uj") {
          ls >> g.energy_uj;
        } else if (k == "t_ns") {
          ls >> g.t_ns;
        } else {
          std::string skip;
          ls >> skip;
        }
      }
      if (!have_min) g.min_mhz = g.locked_mhz;
    } else if (key == "fail_spec") {
      std::string rest;
      std::getline(ls >> std::ws, rest);
      s.fail_spec = rest == "-" ? std::string() : rest;
    } else if (key == "failed") {
      std::string fn;
      long n = 0;
      if (ls >> fn >> n) s.failed[fn] = n;
    }
  }
  return s;
}

std::string format_state(const State& s) {
  std::string out = "emo-nvml-standin-state 1 clock CLOCK_MONOTONIC\n";
  char buf[256];
  for (size_t i = 0; i < s.gpus.size(); ++i) {
    const Gpu& g = s.gpus[i];
    std::snprintf(buf, sizeof buf, "gpu %zu locked_mhz %u min_mhz %u energy_uj %llu t_ns %lld\n", i, g.locked_mhz,
                  g.min_mhz, static_cast<unsigned long long>(g.energy_uj), static_cast<long long>(g.t_ns));
    out += buf;
  }
  out += "fail_spec " + (s.fail_spec.empty() ? std::string("-") : s.fail_spec) + "\n";
  for (const auto& [fn, n] : s.failed) out += "failed " + fn + " " + std::to_string(n) + "\n";
  out += "end\n";
  return out;
}

// The state for one call: the file's (locked while held) or this process's memory.
class StateLease {
 public:
  StateLease() {
    path_ = env("EMO_NVML_STANDIN_STATE");
    if (!path_) {
      state_ = &g_memory;
      return;
    }
    fd_ = ::open(path_, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) {
      std::fprintf(stderr, "nvml stand-in: cannot open %s: %s\n", path_, std::strerror(errno));
      return;
    }
    if (g_depth <= 1) {  // a nested call (signal handler) must not wait for the call it interrupted
      while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
      }
    }
    std::string text;
    char buf[4096];
    for (off_t off = 0;;) {
      ssize_t got = ::pread(fd_, buf, sizeof buf, off);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) break;
      text.append(buf, size_t(got));
      off += got;
    }
    file_state_ = parse_state(text);
    state_ = &file_state_;
  }
  ~StateLease() {
    if (fd_ < 0) return;
    std::string text = format_state(file_state_);
    size_t done = 0;
    while (done < text.size()) {
      ssize_t put = ::pwrite(fd_, text.data() + done, text.size() - done, off_t(done));
      if (put < 0 && errno == EINTR) continue;
      if (put <= 0) break;
      done += size_t(put);
    }
    if (done == text.size()) (void)!::ftruncate(fd_, off_t(text.size()));
    ::close(fd_);  // releases the flock
  }
  StateLease(const StateLease&) = delete;
  StateLease& operator=(const StateLease&) = delete;
  State* state() { return state_; }

 private:
  const char* path_ = nullptr;
  int fd_ = -1;
  State file_state_;
  State* state_ = nullptr;
};

// ---- failure injection, latency, the log ----------------------------------------------------------

// The error EMO_NVML_STANDIN_FAIL asks `fn` to return now, or NVML_SUCCESS; counts it in `s`.
nvmlReturn_t injected(State& s, const char* fn) {
  const char* spec_env = env("EMO_NVML_STANDIN_FAIL");
  std::string spec = spec_env ? spec_env : "";
  if (spec != s.fail_spec) {
    s.fail_spec = spec;
    s.failed.clear();
  }
  if (spec.empty()) return NVML_SUCCESS;
  std::istringstream entries(spec);
  std::string entry;
  while (std::getline(entries, entry, ',')) {
    std::vector<std::string> fields;
    std::istringstream fs(entry);
    std::string f;
    while (std::getline(fs, f, ':')) {
      size_t a = f.find_first_not_of(" \t"), b = f.find_last_not_of(" \t");
      fields.push_back(a == std::string::npos ? std::string() : f.substr(a, b - a + 1));
    }
    if (fields.empty() || fields[0] != fn) continue;
    long count = -1;  // every call
    bool perm = false;
    for (size_t i = 1; i < fields.size(); ++i) {
      if (fields[i] == "perm")
        perm = true;
      else if (!fields[i].empty())
        count = std::strtol(fields[i].c_str(), nullptr, 10);
    }
    long& used = s.failed[fn];
    if (count >= 0 && used >= count) return NVML_SUCCESS;
    ++used;
    return perm ? NVML_ERROR_NO_PERMISSION : NVML_ERROR_UNKNOWN;
  }
  return NVML_SUCCESS;
}

void latency() {
  const char* v = env("EMO_NVML_STANDIN_LATENCY_MS");
  if (!v) return;
  double ms = std::strtod(v, nullptr);
  if (!(ms > 0)) return;
  timespec ts{};
  ts.tv_sec = time_t(ms / 1000);
  ts.tv_nsec = long((ms - double(ts.tv_sec) * 1000) * 1e6);
  while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

void log_call(const char* fn, const std::string& args, nvmlReturn_t rc) {
  const char* path = env("EMO_NVML_STANDIN_LOG");
  if (!path) return;
  std::string line = std::to_string(::getpid()) + " " + fn + (args.empty() ? "" : " " + args) + " " +
                     std::to_string(rc) + "\n";
  int fd = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  (void)!::write(fd, line.data(), line.size());  // one write: lines of concurrent processes stay whole
  ::close(fd);
}

// The device's index, or -1 when `dev` is not a handle of ours.
long index_of(nvmlDevice_t dev) {
  const char* p = reinterpret_cast<const char*>(dev);
  if (p < g_handles || p >= g_handles + kMaxGpus) return -1;
  return long(p - g_handles);
}

std::string dev_arg(nvmlDevice_t dev) {
  long i = index_of(dev);
  return i < 0 ? std::string("?") : std::to_string(i);
}

struct Depth {
  Depth() { ++g_depth; }
  ~Depth() { --g_depth; }
  Depth(const Depth&) = delete;
  Depth& operator=(const Depth&) = delete;
};

// One call: latency, the state (locked), energy brought up to now, an injected failure or `op`, the log.
// `op(State&)` returns the call's code.
template <class Op>
nvmlReturn_t call(const char* fn, const std::string& args, Op op) {
  Depth depth;
  latency();
  nvmlReturn_t rc = NVML_SUCCESS;
  {
    std::unique_lock<std::mutex> lock(g_mu, std::defer_lock);
    if (g_depth <= 1) lock.lock();
    StateLease lease;
    State* s = lease.state();
    if (!s) {
      rc = NVML_ERROR_UNKNOWN;
    } else {
      if (s->gpus.size() < gpu_count()) s->gpus.resize(gpu_count());
      advance(*s, now_ns());
      rc = injected(*s, fn);
      if (rc == NVML_SUCCESS) rc = op(*s);
    }
  }
  log_call(fn, args, rc);
  return rc;
}

// The GPU `dev` names, or null (sets rc) when NVML is not initialized or the handle is bad.
Gpu* gpu_of(State& s, nvmlDevice_t dev, nvmlReturn_t& rc) {
  if (g_init_count <= 0) {
    rc = NVML_ERROR_UNINITIALIZED;
    return nullptr;
  }
  long i = index_of(dev);
  if (i < 0 || unsigned(i) >= gpu_count() || size_t(i) >= s.gpus.size()) {
    rc = NVML_ERROR_INVALID_ARGUMENT;
    return nullptr;
  }
  rc = NVML_SUCCESS;
  return &s.gpus[size_t(i)];
}

// NVML's array convention: too small a *count gets the size needed and INSUFFICIENT_SIZE.
nvmlReturn_t fill(const std::vector<unsigned>& values, unsigned* count, unsigned* out) {
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  if (*count < values.size()) {
    *count = unsigned(values.size());
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  if (!out) return NVML_ERROR_INVALID_ARGUMENT;
  for (size_t i = 0; i < values.size(); ++i) out[i] = values[i];
  *count = unsigned(values.size());
  return NVML_SUCCESS;
}

nvmlReturn_t copy_string(const std::string& s, char* out, unsigned length) {
  if (!out) return NVML_ERROR_INVALID_ARGUMENT;
  if (length < s.size() + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(out, s.c_str(), s.size() + 1);
  return NVML_SUCCESS;
}

}  // namespace

// ---- the exports ----------------------------------------------------------------------------------

extern "C" {

nvmlReturn_t nvmlInit_v2() {
  return call("nvmlInit_v2", "", [](State&) {
    ++g_init_count;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlShutdown() {
  return call("nvmlShutdown", "", [](State&) {
    if (g_init_count <= 0) return NVML_ERROR_UNINITIALIZED;
    --g_init_count;
    return NVML_SUCCESS;
  });
}

const char* nvmlErrorString(nvmlReturn_t result) {
  Depth depth;
  latency();
  log_call("nvmlErrorString", std::to_string(result), NVML_SUCCESS);
  switch (result) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
      return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND:
      return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "Insufficient Size";
    case NVML_ERROR_UNKNOWN:
      return "Unknown Error";
    default:
      return "Unknown Error";
  }
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned* count) {
  return call("nvmlDeviceGetCount_v2", "", [&](State&) {
    if (g_init_count <= 0) return NVML_ERROR_UNINITIALIZED;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    *count = gpu_count();
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_t* device) {
  return call("nvmlDeviceGetHandleByIndex_v2", std::to_string(index), [&](State&) {
    if (g_init_count <= 0) return NVML_ERROR_UNINITIALIZED;
    if (!device || index >= gpu_count()) return NVML_ERROR_INVALID_ARGUMENT;
    *device = reinterpret_cast<nvmlDevice_t>(&g_handles[index]);
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned length) {
  return call("nvmlDeviceGetName", dev_arg(device) + " " + std::to_string(length), [&](State& s) {
    nvmlReturn_t rc = NVML_SUCCESS;
    if (!gpu_of(s, device, rc)) return rc;
    return copy_string(product_name(), name, length);
  });
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned length) {
  return call("nvmlDeviceGetUUID", dev_arg(device) + " " + std::to_string(length), [&](State& s) {
    nvmlReturn_t rc = NVML_SUCCESS;
    if (!gpu_of(s, device, rc)) return rc;
    char buf[64];
    std::snprintf(buf, sizeof buf, "GPU-5a1d0000-e3e0-4000-8000-%012lx", static_cast<unsigned long>(index_of(device)));
    return copy_string(buf, uuid, length);
  });
}

nvmlReturn_t nvmlDeviceGetSupportedMemoryClocks(nvmlDevice_t device, unsigned* count, unsigned* clocksMHz) {
  std::string args = dev_arg(device) + " " + (count ? std::to_string(*count) : std::string("null"));
  return call("nvmlDeviceGetSupportedMemoryClocks", args, [&](State& s) {
    nvmlReturn_t rc = NVML_SUCCESS;
    if (!gpu_of(s, device, rc)) return rc;
    return fill({kMemClockMhz}, count, clocksMHz);
  });
}

nvmlReturn_t nvmlDeviceGetSupportedGraphicsClocks(nvmlDevice_t device, unsigned memoryClockMHz, unsigned* count,
                                                  unsigned* clocksMHz) {
  std::string args = dev_arg(device) + " " + std::to_string(memoryClockMHz) + " " +
                     (count ? std::to_string(*count) : std::string("null"));
  return call("nvmlDeviceGetSupportedGraphicsClocks", args, [&](State& s) {
    nvmlReturn_t rc = NVML_SUCCESS;
    if (!gpu_of(s, device, rc)) return rc;
    if (memoryClockMHz != kMemClockMhz) return NVML_ERROR_NOT_FOUND;
    return fill(sm_clocks(), count, clocksMHz);
  });
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long* energy) {
  return call("nvmlDeviceGetTotalEnergyConsumption", dev_arg(device), [&](State& s) {
    nvmlReturn_t rc = NVML_SUCCESS;
    Gpu* g = gpu_of(s, device, rc);
    if (!g) return rc;
    if (!energy) return NVML_ERROR_INVALID_ARGUMENT;
    *energy = g->energy_uj / 1000;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceSetGpuLockedClocks(nvmlDevice_t device, unsigned minGpuClockMHz, unsigned maxGpuClockMHz) {
  std::string args = dev_arg(device) + " " + std::to_string(minGpuClockMHz) + " " + std::to_string(maxGpuClockMHz);
  return call("nvmlDeviceSetGpuLockedClocks", args, [&](State& s) {
    nvmlReturn_t rc = NVML_SUCCESS;
    Gpu* g = gpu_of(s, device, rc);
    if (!g) return rc;
    if (!supported_sm(minGpuClockMHz) || !supported_sm(maxGpuClockMHz) || minGpuClockMHz > maxGpuClockMHz)
      return NVML_ERROR_INVALID_ARGUMENT;
    g->min_mhz = minGpuClockMHz;
    g->locked_mhz = maxGpuClockMHz;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceResetGpuLockedClocks(nvmlDevice_t device) {
  return call("nvmlDeviceResetGpuLockedClocks", dev_arg(device), [&](State& s) {
    nvmlReturn_t rc = NVML_SUCCESS;
    Gpu* g = gpu_of(s, device, rc);
    if (!g) return rc;
    g->min_mhz = 0;
    g->locked_mhz = 0;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, int type, unsigned* clock) {
  return call("nvmlDeviceGetClockInfo", dev_arg(device) + " " + std::to_string(type), [&](State& s) {
    nvmlReturn_t rc = NVML_SUCCESS;
    Gpu* g = gpu_of(s, device, rc);
    if (!g) return rc;
    if (!clock) return NVML_ERROR_INVALID_ARGUMENT;
    switch (type) {
      case NVML_CLOCK_GRAPHICS:
      case NVML_CLOCK_SM:
        *clock = effective_mhz(*g);
        return NVML_SUCCESS;
      case NVML_CLOCK_MEM:
        *clock = kMemClockMhz;
        return NVML_SUCCESS;
      case NVML_CLOCK_VIDEO:
        *clock = kVideoMhz;
        return NVML_SUCCESS;
      default:
        return NVML_ERROR_INVALID_ARGUMENT;
    }
  });
}

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device, unsigned long long* reasons) {
  return call("nvmlDeviceGetCurrentClocksThrottleReasons", dev_arg(device), [&](State& s) {
    nvmlReturn_t rc = NVML_SUCCESS;
    if (!gpu_of(s, device, rc)) return rc;
    if (!reasons) return NVML_ERROR_INVALID_ARGUMENT;
    *reasons = 0;
    return NVML_SUCCESS;
  });
}

// Not NVML: this process's NVML init count (nvmlInit_v2 calls not yet undone by nvmlShutdown), so that
// a test can check that every open is paired with a shutdown; its presence also tells a test that it
// loaded the stand-in and not a real driver's library.
int emo_nvml_standin_init_count() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_init_count;
}

}  // extern "C"
