// `emo clockd`: the one privileged process on a node. It owns the GPUs' SM clocks; jobs (unprivileged)
// ask it over a Unix socket to lock and reset them. The admin's config names the GPUs, the clock range
// each may be locked to and the group allowed to connect. One lease per GPU: a client acquires a GPU,
// locks and resets its clock, renews its lease; when it disconnects (exits, crashes, is SIGKILLed) or
// stops renewing, the daemon resets that GPU and frees the lease. Every change is logged, one line each.
// docs/clockd.md has the config keys, the protocol, a systemd unit and a container example.
//
// Protocol: one request per frame, a JSON object on one line ending in '\n', at most kClockdMaxFrame
// bytes before the newline (a longer frame gets an error reply and the connection is closed). Every
// request gets exactly one reply line, in order: {"ok":true,...} or {"ok":false,"error":"...","note":"..."}.
//   {"op":"hello","client":"NAME"}       names the client in the log; replies lease_ms and the GPU count
//   {"op":"acquire","gpu":G}             takes GPU G's lease (G: the position in the config's "gpus")
//   {"op":"lock","gpu":G,"mhz":M}        locks the SM clock (the lease needed; M supported and in range)
//   {"op":"reset","gpu":G}               the default clock policy again (the lease needed)
//   {"op":"renew"}                       extends every lease of this connection by lease_ms
//   {"op":"release","gpu":G}             resets GPU G, then gives its lease up
//   {"op":"status"}                      every GPU: device, range, clock, holder, reset failures
// A malformed request (not JSON, unknown op, wrong types) gets an error reply; the connection stays.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "emo/base/result.h"
#include "emo/device/device.h"
#include "emo/runtime/clock_control.h"

namespace emo::runtime {

// The longest request line the daemon reads (bytes before the newline).
inline constexpr size_t kClockdMaxFrame = 4096;
inline constexpr const char* kClockdDefaultSocket = "/run/emo/clockd.sock";

struct ClockdGpuConfig {
  std::string device;  // "nvml:0" (hardware), "emulated:h100" (tests)
  int min_mhz = 0;     // the admin's range: locks outside it are refused
  int max_mhz = 0;
};

struct ClockdConfig {
  std::string source;                       // the config file (messages); empty when built in code
  std::string socket = kClockdDefaultSocket;
  std::string group;                        // may connect (socket 0660, this group); empty: root and the daemon's user only (0600)
  int lease_ms = 5000;                      // a lease not renewed for this long expires: the GPU is reset
  std::string log;                          // the change log (appended); empty: stderr
  int max_clients = 64;                     // connections beyond this are refused
  std::vector<ClockdGpuConfig> gpus;        // protocol GPU g is gpus[g]
};

// Reads and validates the admin config (JSON; see docs/clockd.md). Errors name FILE:KEY.
Result<ClockdConfig> read_clockd_config(const std::string& path);
// The same from text; `where` names it in errors.
Result<ClockdConfig> parse_clockd_config(const std::string& text, const std::string& where);

// `emo clockd --check`: what the daemon would serve, changing nothing (no reset, no socket): the group,
// the socket path's state, each GPU opened with its model and the clocks its range allows. An Error
// for anything make() would refuse.
Result<std::string> check_clockd_config(const ClockdConfig& config);

class ClockdServer {
 public:
  // Opens the config's devices (backends' specs), checks each range against the supported clocks,
  // resets every GPU (a previous daemon may have died with clocks locked), opens the log and binds
  // the socket (replacing a stale socket file; anything else at the path is an error, never removed).
  // Clients may connect as soon as it returns; run_until_stopped() serves them.
  static Result<ClockdServer> make(ClockdConfig config);
  // The same over devices already opened (tests): devices[g] serves config.gpus[g]; not owned.
  static Result<ClockdServer> make(ClockdConfig config, std::vector<device::Device*> devices);

  ClockdServer(ClockdServer&&) noexcept;
  ClockdServer& operator=(ClockdServer&&) noexcept;
  ~ClockdServer();  // resets every GPU if run_until_stopped() did not, removes the socket

  // Serves until stop(): then resets every GPU and removes the socket. The Error, if any, names what
  // failed to reset (a failed reset is never swallowed: logged, retried, counted and returned here).
  Status run_until_stopped();
  // Ends run_until_stopped(): from any thread, or a signal handler (async-signal-safe).
  void stop();
  // Resets that failed (after every retry) since make(): at start, on release, disconnect, expiry, stop.
  int reset_failures() const;
  const ClockdConfig& config() const;
  // The devices served, in config order (for `emo clockd --check`).
  std::vector<device::Device*> devices() const;
  // Each GPU's supported clocks inside its range, ascending.
  const std::vector<std::vector<int>>& allowed_clocks() const;

  struct Impl;

 private:
  explicit ClockdServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The daemon's status reply (JSON, one line), asked without taking a lease.
Result<std::string> clockd_status(const std::string& socket_path, int timeout_ms = 5000);

// Failed resets a ClockdClient's destructor could not return (said on stderr too).
int clockd_client_reset_failures();

// One GPU through the daemon: connect() acquires its lease, a background thread renews it every
// lease_ms / 3, the destructor resets and releases it (and the daemon resets it anyway should this
// process die). Every wait is bounded (`timeout_ms`); errors name the socket.
class ClockdClient final : public ClockControl {
 public:
  struct Options {
    std::string client = "emo";  // the name the daemon logs
    int timeout_ms = 5000;       // connect and each reply
    bool renew = true;           // the background renewal (off: the caller sends renew())
  };
  static Result<std::unique_ptr<ClockdClient>> connect(const std::string& socket_path, int gpu, Options options);
  static Result<std::unique_ptr<ClockdClient>> connect(const std::string& socket_path, int gpu) {
    return connect(socket_path, gpu, Options{});
  }
  ~ClockdClient() override;
  ClockdClient(const ClockdClient&) = delete;
  ClockdClient& operator=(const ClockdClient&) = delete;

  // "clockd:/run/emo/clockd.sock#0".
  std::string describe() const override;
  Status lock_sm_clock(int mhz) override;
  Status reset_sm_clock() override;
  // Extends the lease now (the background thread does this on its own).
  Status renew();
  // Resets the clock and gives the lease up; later calls fail. The destructor does it if not done.
  Status release();
  // The daemon's status reply (JSON text, one line).
  Result<std::string> status();
  int lease_ms() const { return lease_ms_; }
  int gpu() const { return gpu_; }

  // One raw request line -> the reply line (no parsing); for tools and tests.
  Result<std::string> request(const std::string& line);

 private:
  ClockdClient(int fd, std::string socket_path, int gpu, Options options);
  Status call(const std::string& line, std::string* reply_out);  // request + {"ok":true} check
  void renew_loop();

  int fd_ = -1;
  std::string socket_;
  int gpu_ = 0;
  Options options_;
  int lease_ms_ = 0;
  std::mutex io_mu_;  // one request/reply on the socket at a time
  std::string pending_in_;
  bool released_ = false;
  std::mutex state_mu_;
  std::condition_variable state_cv_;
  bool stopping_ = false;
  Error lost_;          // the renewal's failure, if any
  bool lost_set_ = false;
  std::thread renewer_;
};

}  // namespace emo::runtime
