// The NVML backend. libnvidia-ml.so.1 is opened with dlopen and the dozen entry points EMO uses are
// looked up by name; their prototypes below follow NVML's public API reference (no NVML header is
// needed to build). Microbenchmarks run in the `emo-microbench` child process; this file measures
// the energy around them and samples the clock and throttle reasons while they run.
#include "emo/device/nvml.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

extern char** environ;

namespace emo::device {

// ---- NVML's C API, as far as EMO uses it --------------------------------------------------------

namespace {

using nvmlReturn_t = int;    // an enum in nvml.h; 0 = NVML_SUCCESS
using nvmlDevice_t = void*;  // struct nvmlDevice_st*
constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
constexpr nvmlReturn_t NVML_ERROR_NO_PERMISSION = 4;
constexpr nvmlReturn_t NVML_ERROR_NOT_FOUND = 6;
constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
constexpr nvmlReturn_t NVML_ERROR_DRIVER_NOT_LOADED = 9;
constexpr int NVML_CLOCK_SM = 1;    // nvmlClockType_t
constexpr unsigned kNameSize = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned kUuidSize = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE

// nvmlClocksThrottleReason* bits that pull the clock below a lock.
constexpr uint64_t kSwPowerCap = 0x4, kHwSlowdown = 0x8, kSwThermal = 0x20, kHwThermal = 0x40,
                   kHwPowerBrake = 0x80;

constexpr const char* kLibName = "libnvidia-ml.so.1";

}  // namespace

struct NvmlDevice::Library {
  void* dl = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*get_handle_by_index)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*get_name)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*get_uuid)(nvmlDevice_t, char*, unsigned) = nullptr;  // optional
  nvmlReturn_t (*get_supported_memory_clocks)(nvmlDevice_t, unsigned*, unsigned*) = nullptr;
  nvmlReturn_t (*get_supported_graphics_clocks)(nvmlDevice_t, unsigned, unsigned*, unsigned*) = nullptr;
  nvmlReturn_t (*get_total_energy)(nvmlDevice_t, unsigned long long*) = nullptr;  // mJ
  nvmlReturn_t (*set_locked_clocks)(nvmlDevice_t, unsigned, unsigned) = nullptr;
  nvmlReturn_t (*reset_locked_clocks)(nvmlDevice_t) = nullptr;
  nvmlReturn_t (*get_clock_info)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*get_throttle_reasons)(nvmlDevice_t, unsigned long long*) = nullptr;  // optional

  std::string describe(nvmlReturn_t rc) const {
    const char* s = error_string ? error_string(rc) : nullptr;
    return (s && *s ? std::string(s) : std::string("NVML error")) + " (" + std::to_string(rc) + ")";
  }
};

namespace {

using Library = NvmlDevice::Library;

template <class F>
bool bind(void* dl, const char* name, F& fn) {
  void* sym = ::dlsym(dl, name);
  if (!sym) return false;
  fn = reinterpret_cast<F>(sym);
  return true;
}

// The library is loaded once per process and never unloaded: NVML keeps driver state that does not
// survive dlclose well, and a handful of pointers cost nothing.
Result<std::shared_ptr<Library>> load_library(const std::string& where) {
  static std::shared_ptr<Library> loaded;
  if (loaded) return loaded;
  void* dl = ::dlopen(kLibName, RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    const char* why = ::dlerror();
    return make_error(
        where, std::string("cannot load ") + kLibName + (why ? std::string(": ") + why : std::string()),
        "NVML comes with the NVIDIA driver; on a machine without an NVIDIA GPU use an emulated device");
  }
  auto lib = std::make_shared<Library>();
  lib->dl = dl;
  struct Need {
    const char* name;
    bool ok;
  };
  const Need needs[] = {
      {"nvmlInit_v2", bind(dl, "nvmlInit_v2", lib->init)},
      {"nvmlShutdown", bind(dl, "nvmlShutdown", lib->shutdown)},
      {"nvmlErrorString", bind(dl, "nvmlErrorString", lib->error_string)},
      {"nvmlDeviceGetHandleByIndex_v2", bind(dl, "nvmlDeviceGetHandleByIndex_v2", lib->get_handle_by_index)},
      {"nvmlDeviceGetName", bind(dl, "nvmlDeviceGetName", lib->get_name)},
      {"nvmlDeviceGetSupportedMemoryClocks",
       bind(dl, "nvmlDeviceGetSupportedMemoryClocks", lib->get_supported_memory_clocks)},
      {"nvmlDeviceGetSupportedGraphicsClocks",
       bind(dl, "nvmlDeviceGetSupportedGraphicsClocks", lib->get_supported_graphics_clocks)},
      {"nvmlDeviceGetTotalEnergyConsumption",
       bind(dl, "nvmlDeviceGetTotalEnergyConsumption", lib->get_total_energy)},
      {"nvmlDeviceSetGpuLockedClocks", bind(dl, "nvmlDeviceSetGpuLockedClocks", lib->set_locked_clocks)},
      {"nvmlDeviceResetGpuLockedClocks",
       bind(dl, "nvmlDeviceResetGpuLockedClocks", lib->reset_locked_clocks)},
      {"nvmlDeviceGetClockInfo", bind(dl, "nvmlDeviceGetClockInfo", lib->get_clock_info)},
  };
  for (const Need& n : needs) {
    if (!n.ok)
      return make_error(where, std::string(kLibName) + " lacks " + n.name,
                        "the NVIDIA driver is too old for EMO (clock locking needs driver 440 or newer)");
  }
  (void)bind(dl, "nvmlDeviceGetUUID", lib->get_uuid);
  // Renamed to "clocks event reasons" in newer drivers; the old name is still exported, but accept both.
  if (!bind(dl, "nvmlDeviceGetCurrentClocksThrottleReasons", lib->get_throttle_reasons))
    (void)bind(dl, "nvmlDeviceGetCurrentClocksEventReasons", lib->get_throttle_reasons);
  loaded = lib;
  return lib;
}

Error nvml_error(const Library& lib, const std::string& where, const std::string& call, nvmlReturn_t rc) {
  std::string note;
  if (rc == NVML_ERROR_NO_PERMISSION)
    note = "needs root: locking and resetting GPU clocks is reserved to root (run emo as root, e.g. with sudo, "
           "or let the node's `emo clockd` daemon, which runs as root, steer the clocks)";
  else if (rc == NVML_ERROR_NOT_SUPPORTED)
    note = "this GPU or driver does not support it (locked SM clocks need a Volta or newer datacenter GPU)";
  else if (rc == NVML_ERROR_DRIVER_NOT_LOADED)
    note = "the NVIDIA kernel driver is not loaded (does `nvidia-smi` work?)";
  else if (rc == NVML_ERROR_NOT_FOUND)
    note = "`nvidia-smi -L` lists the GPUs and their indices";
  return make_error(where, call + " failed: " + lib.describe(rc), note);
}

// Sizes a query that fills an array: NVML answers INSUFFICIENT_SIZE with the count it needs.
template <class Query>
Result<std::vector<unsigned>> query_array(const Library& lib, const std::string& where,
                                          const std::string& call, Query query) {
  std::vector<unsigned> out(256);
  for (int attempt = 0; attempt < 3; ++attempt) {
    unsigned count = static_cast<unsigned>(out.size());
    nvmlReturn_t rc = query(&count, out.data());
    if (rc == NVML_SUCCESS) {
      out.resize(std::min<size_t>(count, out.size()));
      return out;
    }
    if (rc != NVML_ERROR_INSUFFICIENT_SIZE) return nvml_error(lib, where, call, rc);
    out.resize(std::max<size_t>(count, out.size() * 2));
  }
  return make_error(where, call + " kept asking for a larger buffer");
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// `needle` occurs in `hay` with no digit right before or after it ("a40" is not in "a4000").
bool contains_model(const std::string& hay, const std::string& needle) {
  for (size_t pos = hay.find(needle); pos != std::string::npos; pos = hay.find(needle, pos + 1)) {
    bool digit_before = pos > 0 && std::isdigit(static_cast<unsigned char>(hay[pos - 1]));
    size_t end = pos + needle.size();
    bool digit_after = end < hay.size() && std::isdigit(static_cast<unsigned char>(hay[end]));
    if (!digit_before && !digit_after) return true;
  }
  return false;
}

// A built-in name of the form letter + number ("h100") split into its parts; false otherwise.
bool split_model(const std::string& name, char& family, int& number) {
  if (name.size() < 2 || !std::isalpha(static_cast<unsigned char>(name[0]))) return false;
  for (size_t i = 1; i < name.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return false;
  }
  family = name[0];
  number = std::atoi(name.c_str() + 1);
  return true;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

void set_cloexec(int fd) { ::fcntl(fd, F_SETFD, ::fcntl(fd, F_GETFD) | FD_CLOEXEC); }

}  // namespace

// ---- profile matching ---------------------------------------------------------------------------

Result<ProfileMatch> match_profile(std::string_view product_name) {
  std::string name = lower(product_name);
  auto pick = [&](const std::string& builtin, std::string note) -> Result<ProfileMatch> {
    auto p = builtin_profile(builtin);
    if (!p) return p.error();
    if (note.empty() && contains_model(name, "pcie") && builtin.find("pcie") == std::string::npos)
      note = "a PCIe board: the " + builtin +
             " profile's power figures are for the SXM module; `emo calibrate` "
             "measures this board's own";
    return ProfileMatch{std::move(*p), std::move(note)};
  };
  for (const char* direct : {"h200", "h100", "a100", "v100", "a40"}) {
    if (!contains_model(name, direct)) continue;
    std::string builtin = direct;
    if (builtin == "v100" && contains_model(name, "pcie")) builtin = "v100-pcie";
    return pick(builtin, "");
  }
  // No direct match: the nearest model number within the same family letter ("h800" -> h200 or h100).
  for (size_t i = 0; i < name.size(); ++i) {
    if (!std::isalpha(static_cast<unsigned char>(name[i])) || i + 1 >= name.size() ||
        !std::isdigit(static_cast<unsigned char>(name[i + 1])))
      continue;
    if (i > 0 && std::isalpha(static_cast<unsigned char>(name[i - 1]))) continue;  // "rtx4090": no family
    int number = std::atoi(name.c_str() + i + 1);
    std::string best;
    int best_dist = 0;
    for (const auto& builtin : builtin_profile_names()) {
      char family = 0;
      int n = 0;
      if (!split_model(builtin, family, n) || family != name[i]) continue;
      int dist = std::abs(n - number);
      if (best.empty() || dist < best_dist) {
        best = builtin;
        best_dist = dist;
      }
    }
    if (!best.empty()) {
      return pick(best, "no built-in profile for '" + std::string(product_name) + "': using " + best +
                            ", the nearest of its family; `emo calibrate` fits this GPU's own");
    }
  }
  return make_error(std::string(product_name), "no built-in device profile resembles this GPU",
                    "built-in profiles: " + join(builtin_profile_names()) +
                        "; write a profile JSON for it (see `emo devices --json`)");
}

// ---- the device ---------------------------------------------------------------------------------

NvmlDevice::NvmlDevice(std::shared_ptr<Library> lib, void* handle, int index, std::string name,
                       DeviceProfile profile)
    : lib_(std::move(lib)),
      handle_(handle),
      index_(index),
      name_(std::move(name)),
      profile_(std::move(profile)) {
  if (lib_ && lib_->get_uuid) {
    char buf[kUuidSize] = {};
    if (lib_->get_uuid(handle_, buf, kUuidSize) == NVML_SUCCESS) uuid_ = buf;
  }
}

NvmlDevice::~NvmlDevice() {
  if (lib_) lib_->shutdown();  // NVML counts inits; this undoes open_nvml_device's
}

Result<std::vector<int>> NvmlDevice::supported_sm_clocks() {
  const std::string where = spec();
  auto mem = query_array(*lib_, where, "nvmlDeviceGetSupportedMemoryClocks", [&](unsigned* n, unsigned* v) {
    return lib_->get_supported_memory_clocks(handle_, n, v);
  });
  if (!mem) return mem.error();
  if (mem->empty()) return make_error(where, "NVML lists no supported memory clock");
  // SM clocks are listed per memory clock; EMO leaves the memory clock alone, at its highest.
  unsigned mem_mhz = *std::max_element(mem->begin(), mem->end());
  auto sm = query_array(*lib_, where, "nvmlDeviceGetSupportedGraphicsClocks", [&](unsigned* n, unsigned* v) {
    return lib_->get_supported_graphics_clocks(handle_, mem_mhz, n, v);
  });
  if (!sm) return sm.error();
  std::vector<int> out(sm->begin(), sm->end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  out.erase(std::remove_if(out.begin(), out.end(), [](int f) { return f <= 0; }), out.end());
  if (out.empty()) return make_error(where, "NVML lists no supported SM clock");
  return out;
}

Status NvmlDevice::lock_sm_clock(int mhz) {
  if (mhz <= 0) return make_error(spec(), "cannot lock the SM clock to " + std::to_string(mhz) + " MHz");
  unsigned f = static_cast<unsigned>(mhz);
  nvmlReturn_t rc = lib_->set_locked_clocks(handle_, f, f);
  if (rc != NVML_SUCCESS)
    return nvml_error(*lib_, spec(), "nvmlDeviceSetGpuLockedClocks(" + std::to_string(mhz) + ")", rc);
  return {};
}

Status NvmlDevice::reset_sm_clock() {
  nvmlReturn_t rc = lib_->reset_locked_clocks(handle_);
  if (rc != NVML_SUCCESS) return nvml_error(*lib_, spec(), "nvmlDeviceResetGpuLockedClocks", rc);
  return {};
}

Result<double> NvmlDevice::energy_j() {
  unsigned long long mj = 0;
  nvmlReturn_t rc = lib_->get_total_energy(handle_, &mj);
  if (rc != NVML_SUCCESS) return nvml_error(*lib_, spec(), "nvmlDeviceGetTotalEnergyConsumption", rc);
  return static_cast<double>(mj) / 1000.0;
}

Result<BenchRun> NvmlDevice::run_benchmark(const BenchSpec& bench) {
  auto exe = find_microbench();
  if (!exe) return exe.error();
  std::vector<std::string> argv{*exe};
  for (auto& a : microbench_args(bench, index_, uuid_)) argv.push_back(std::move(a));
  telemetry_ = BenchTelemetry{};
  double clock_sum = 0;
  auto sample = [&] {
    unsigned clock = 0;
    if (lib_->get_clock_info(handle_, NVML_CLOCK_SM, &clock) == NVML_SUCCESS && clock > 0) {
      clock_sum += clock;
      ++telemetry_.samples;
      telemetry_.mean_sm_clock_mhz = clock_sum / telemetry_.samples;
    }
    unsigned long long reasons = 0;
    if (lib_->get_throttle_reasons && lib_->get_throttle_reasons(handle_, &reasons) == NVML_SUCCESS)
      telemetry_.throttle_reasons |= reasons;
  };
  // Generous: CUDA context creation and buffer setup take seconds on a large GPU.
  double timeout_s = 60 + 10 * std::max(bench.min_seconds, 0.0);
  auto run = run_microbench(
      argv, [this] { return energy_j(); }, sample, timeout_s);
  if (!run) {
    Error e = run.error();
    e.where = spec() + ": " + e.where;
    return e;
  }
  return run;
}

std::string BenchTelemetry::slowdown() const {
  std::vector<std::string> why;
  if (throttle_reasons & kSwPowerCap) why.push_back("power cap");
  if (throttle_reasons & kHwPowerBrake) why.push_back("power brake");
  if (throttle_reasons & (kSwThermal | kHwThermal)) why.push_back("thermal slowdown");
  if (throttle_reasons & kHwSlowdown) why.push_back("hardware slowdown");
  return join(why);
}

Result<std::unique_ptr<Device>> open_nvml_device(int index) {
  const std::string where = "nvml:" + std::to_string(index);
  if (index < 0) return make_error(where, "a GPU index is 0 or more");
  auto lib = load_library(where);
  if (!lib) return lib.error();
  nvmlReturn_t rc = (*lib)->init();
  if (rc != NVML_SUCCESS) return nvml_error(**lib, where, "nvmlInit_v2", rc);
  // From here on every error path must undo the init.
  auto fail = [&](Error e) -> Result<std::unique_ptr<Device>> {
    (*lib)->shutdown();
    return e;
  };
  nvmlDevice_t handle = nullptr;
  rc = (*lib)->get_handle_by_index(static_cast<unsigned>(index), &handle);
  if (rc != NVML_SUCCESS) return fail(nvml_error(**lib, where, "nvmlDeviceGetHandleByIndex_v2", rc));
  char name[kNameSize] = {};
  rc = (*lib)->get_name(handle, name, kNameSize);
  if (rc != NVML_SUCCESS) return fail(nvml_error(**lib, where, "nvmlDeviceGetName", rc));
  auto match = match_profile(name);
  if (!match) {
    Error e = match.error();
    e.where = where + ": " + e.where;
    return fail(e);
  }
  // The device constructor owns the init from here (its destructor shuts NVML down).
  auto dev = std::make_unique<NvmlDevice>(*lib, handle, index, name, std::move(match->profile));
  dev->set_profile_note(match->note);
  return std::unique_ptr<Device>(std::move(dev));
}

// ---- the microbenchmark child process -----------------------------------------------------------

std::vector<std::string> microbench_args(const BenchSpec& spec, int index, const std::string& uuid) {
  char buf[64];
  std::vector<std::string> args{to_string(spec.kind)};
  if (spec.kind == BenchKind::kIntensity) {
    std::snprintf(buf, sizeof buf, "%.17g", spec.flops_per_byte);
    args.insert(args.end(), {"--flops-per-byte", buf});
  }
  std::snprintf(buf, sizeof buf, "%.17g", spec.min_seconds);
  args.insert(args.end(), {"--min-seconds", buf});
  if (!uuid.empty())
    args.insert(args.end(), {"--uuid", uuid});
  else
    args.insert(args.end(), {"--device", std::to_string(index)});
  return args;
}

Result<std::string> find_microbench() {
  constexpr const char* kExe = "emo-microbench";
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    std::filesystem::path beside = self.parent_path() / kExe;
    if (::access(beside.c_str(), X_OK) == 0) return beside.string();
  }
  if (const char* path = std::getenv("PATH")) {
    std::string p = path;
    size_t pos = 0;
    while (pos <= p.size()) {
      size_t colon = p.find(':', pos);
      if (colon == std::string::npos) colon = p.size();
      std::string dir = p.substr(pos, colon - pos);
      if (!dir.empty()) {
        std::string cand = dir + "/" + kExe;
        if (::access(cand.c_str(), X_OK) == 0) return cand;
      }
      pos = colon + 1;
    }
  }
  return make_error(kExe, "not found next to the emo binary or on PATH",
                    "build EMO where nvcc is available (EMO_BUILD_GPU=ON), or put emo-microbench on PATH");
}

Result<MicrobenchLine> parse_microbench_line(std::string_view line) {
  auto bad = [&](const std::string& why) {
    return make_error("emo-microbench", why + ": '" + std::string(line.substr(0, 200)) + "'");
  };
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return bad("output is not a JSON object");
  if (auto ph = j.find("phase"); ph != j.end()) {
    if (ph->is_string() && ph->get<std::string>() == "start") return MicrobenchLine{"start", 0, 0};
    return bad("unknown phase");
  }
  auto kind = j.find("kind");
  auto seconds = j.find("seconds");
  auto iterations = j.find("iterations");
  if (kind == j.end() || !kind->is_string()) return bad("no \"kind\" string");
  if (seconds == j.end() || !seconds->is_number() || !std::isfinite(seconds->get<double>()) ||
      seconds->get<double>() <= 0)
    return bad("no positive \"seconds\"");
  if (iterations == j.end() || !iterations->is_number_integer() || iterations->get<int64_t>() < 0)
    return bad("no \"iterations\" count");
  return MicrobenchLine{kind->get<std::string>(), seconds->get<double>(), iterations->get<int64_t>()};
}

Result<BenchRun> run_microbench(const std::vector<std::string>& argv,
                                const std::function<Result<double>()>& energy_j,
                                const std::function<void()>& sample, double timeout_s) {
  const std::string where = argv.empty() ? std::string("emo-microbench") : argv[0];
  if (argv.empty()) return make_error(where, "no command");
  int out_pipe[2], err_pipe[2];
  if (::pipe(out_pipe) != 0) return make_error(where, std::string("pipe: ") + std::strerror(errno));
  if (::pipe(err_pipe) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return make_error(where, std::string("pipe: ") + std::strerror(errno));
  }
  set_cloexec(out_pipe[0]);
  set_cloexec(err_pipe[0]);

  // The child sees NVML's GPU numbering (PCI bus order) when it selects a GPU by index.
  std::vector<std::string> env_store;
  for (char** e = environ; e && *e; ++e) {
    if (std::strncmp(*e, "CUDA_DEVICE_ORDER=", 18) != 0) env_store.emplace_back(*e);
  }
  env_store.emplace_back("CUDA_DEVICE_ORDER=PCI_BUS_ID");
  std::vector<char*> envp, args;
  for (auto& s : env_store) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_store = argv;
  for (auto& s : argv_store) args.push_back(s.data());
  args.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, out_pipe[1]);
  posix_spawn_file_actions_addclose(&actions, err_pipe[1]);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (rc != 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    return make_error(where, std::string("cannot start: ") + std::strerror(rc));
  }

  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  std::string out_buf, err_buf;
  bool started = false, have_result = false;
  double e_start = 0, e_end = 0;
  MicrobenchLine result;
  std::string failure;  // set on the first problem; the child is then killed
  bool out_open = true, err_open = true;
  auto last_sample = t0;

  auto handle_line = [&](const std::string& line) {
    if (line.empty() || !failure.empty()) return;
    auto parsed = parse_microbench_line(line);
    if (!parsed) {
      failure = parsed.error().what;
      return;
    }
    if (parsed->kind == "start") {
      auto e = energy_j();
      if (!e) {
        failure = e.error().message();
        return;
      }
      started = true;
      e_start = *e;
      return;
    }
    if (!started) {
      failure = "result printed before the start line";
      return;
    }
    auto e = energy_j();
    if (!e) {
      failure = e.error().message();
      return;
    }
    e_end = *e;
    result = *parsed;
    have_result = true;
  };

  while ((out_open || err_open) && failure.empty()) {
    pollfd fds[2];
    nfds_t n = 0;
    if (out_open) fds[n++] = pollfd{out_pipe[0], POLLIN, 0};
    if (err_open) fds[n++] = pollfd{err_pipe[0], POLLIN, 0};
    int ready = ::poll(fds, n, 100);
    if (ready < 0 && errno != EINTR) {
      failure = std::string("poll: ") + std::strerror(errno);
      break;
    }
    for (nfds_t i = 0; i < n && ready > 0; ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      bool is_out = fds[i].fd == out_pipe[0];
      if (got <= 0) {
        (is_out ? out_open : err_open) = false;
        continue;
      }
      if (is_out) {
        out_buf.append(buf, static_cast<size_t>(got));
        for (size_t nl; (nl = out_buf.find('\n')) != std::string::npos;) {
          std::string line = out_buf.substr(0, nl);
          out_buf.erase(0, nl + 1);
          handle_line(line);
        }
      } else {
        err_buf.append(buf, static_cast<size_t>(got));
        if (err_buf.size() > 8192) err_buf.erase(0, err_buf.size() - 4096);
      }
    }
    auto now = Clock::now();
    if (started && !have_result && sample && now - last_sample >= std::chrono::milliseconds(100)) {
      sample();
      last_sample = now;
    }
    if (std::chrono::duration<double>(now - t0).count() > timeout_s)
      failure = "no result after " + std::to_string(static_cast<int>(timeout_s)) + " s";
  }
  if (!out_buf.empty()) handle_line(out_buf);  // a last line without newline
  ::close(out_pipe[0]);
  ::close(err_pipe[0]);
  if (!failure.empty()) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }

  // The child's own complaint is the most useful part of an error.
  std::string last_err;
  {
    std::string e = err_buf;
    while (!e.empty() && (e.back() == '\n' || e.back() == '\r')) e.pop_back();
    size_t nl = e.rfind('\n');
    last_err = nl == std::string::npos ? e : e.substr(nl + 1);
  }
  auto error_with_stderr = [&](const std::string& what) {
    return make_error(where, what + (last_err.empty() ? std::string() : ": " + last_err),
                      "run it by hand to see its whole output: " + where + " --help");
  };
  if (!failure.empty()) return error_with_stderr(failure);
  if (WIFSIGNALED(status)) return error_with_stderr("killed by signal " + std::to_string(WTERMSIG(status)));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return error_with_stderr("exited with status " + std::to_string(WEXITSTATUS(status)));
  if (!have_result) return error_with_stderr(started ? "printed no result line" : "printed no start line");
  if (e_end < e_start) return make_error(where, "the energy counter went backwards during the run");
  BenchRun run;
  run.seconds = result.seconds;
  run.iterations = result.iterations;
  run.energy_j = e_end - e_start;
  return run;
}

}  // namespace emo::device
