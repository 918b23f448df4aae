// Pieces of the Device interface shared by every backend: benchmark names and ClockGuard, which makes
// sure a locked SM clock never outlives the process that locked it — not on an error, not on an early
// return, not on Ctrl-C or a `kill`.
#include "emo/device/device.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <iterator>

namespace emo::device {

const char* to_string(BenchKind k) {
  switch (k) {
    case BenchKind::kFmaLoop:
      return "fma_loop";
    case BenchKind::kStreamCopy:
      return "stream_copy";
    case BenchKind::kIntensity:
      return "intensity";
    case BenchKind::kTensorGemm:
      return "tensor_gemm";
    case BenchKind::kIdle:
      return "idle";
  }
  return "unknown";
}

namespace {

// The device whose clock is locked, for the signal handler. A signal handler can reach nothing but
// globals; the atomic exchange makes sure only one of the handler and the guard resets.
std::atomic<Device*> g_locked_device{nullptr};
std::atomic<int> g_reset_failures{0};
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
struct sigaction g_previous[std::size(kSignals)];

// Resets the clock, puts back the handler that was there before and raises the signal again, so the
// process ends (or the earlier handler runs) exactly as if the guard had not been there. Resetting
// goes through NVML, which is not on POSIX's async-signal-safe list; the process is about to die
// anyway, and a reset that works in practice beats a GPU left at a low clock for the next job.
extern "C" void clock_guard_on_signal(int sig) {
  Device* device = g_locked_device.exchange(nullptr);
  if (device != nullptr) {
    bool ok = false;
    for (int i = 0; i < 3 && !ok; ++i) ok = device->reset_sm_clock().ok();
    if (!ok) {
      g_reset_failures.fetch_add(1);
      static const char msg[] =
          "error: the locked SM clock could not be reset on a signal; reset it (`nvidia-smi -rgc`, as root)\n";
      (void)!::write(2, msg, sizeof msg - 1);
    }
  }
  for (size_t i = 0; i < std::size(kSignals); ++i) ::sigaction(kSignals[i], &g_previous[i], nullptr);
  ::raise(sig);
}

void install_handlers() {
  struct sigaction sa {};
  sa.sa_handler = clock_guard_on_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : kSignals) sigaddset(&sa.sa_mask, sig);
  sa.sa_flags = 0;
  for (size_t i = 0; i < std::size(kSignals); ++i) ::sigaction(kSignals[i], &sa, &g_previous[i]);
}

void restore_handlers() {
  for (size_t i = 0; i < std::size(kSignals); ++i) ::sigaction(kSignals[i], &g_previous[i], nullptr);
}

// Frees the process-wide slot held for `device`. When the signal handler got there first it has
// already put the old handlers back.
void release_slot(Device* device) {
  Device* expected = device;
  if (g_locked_device.compare_exchange_strong(expected, nullptr)) restore_handlers();
}

}  // namespace

ClockGuard::ClockGuard(Device& device) : device_(device) {}

int clock_reset_failures() { return g_reset_failures.load(); }

ClockGuard::~ClockGuard() {
  if (!locked_) return;
  Status st = reset();
  for (int i = 0; i < 2 && !st.ok() && locked_; ++i) st = reset();
  if (!st.ok()) {
    g_reset_failures.fetch_add(1);
    std::fprintf(stderr, "error: the SM clock of %s could not be reset: %s\nnote: reset it by hand (`nvidia-smi -rgc`, as root)\n",
                 device_.spec().c_str(), st.error().message().c_str());
  }
  // Give up the process-wide slot even when the reset failed: the device may not outlive the guard.
  release_slot(&device_);
  locked_ = false;
}

Status ClockGuard::lock(int mhz) {
  if (!locked_) {
    // Claim the process-wide slot before touching the clock, so that a signal arriving during the
    // lock call already resets it.
    Device* expected = nullptr;
    if (!g_locked_device.compare_exchange_strong(expected, &device_))
      return make_error(device_.spec(), "another ClockGuard already holds a locked clock",
                        "lock clocks through one guard per process");
    install_handlers();
    locked_ = true;
  }
  Status s = device_.lock_sm_clock(mhz);
  if (!s.ok()) {
    // A failed lock may still have changed something: undo it, keep the lock call's error.
    (void)reset();
    return s;
  }
  return {};
}

Status ClockGuard::reset() {
  Status s = device_.reset_sm_clock();
  // A failed reset keeps the guard armed: the destructor and the signal handler try again.
  if (s.ok() && locked_) {
    release_slot(&device_);
    locked_ = false;
  }
  return s;
}

}  // namespace emo::device
