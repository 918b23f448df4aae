// Profiling runs recorded on hardware. See emo/runtime/profile_job.h.
#include "emo/runtime/profile_job.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <thread>

namespace emo::runtime {

namespace fs = std::filesystem;

namespace {

int64_t realtime_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Runs `command` with /bin/sh -c and extra environment; its exit status, or an Error (could not start,
// killed by a signal, timed out).
Status run_command(const std::string& command, const std::vector<std::pair<std::string, std::string>>& env,
                   double timeout_s, const std::string& where) {
  const pid_t pid = ::fork();
  if (pid < 0) return make_error(where, "cannot start the command (fork failed)");
  if (pid == 0) {
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  while (true) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0) return make_error(where, "lost the command's process");
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return make_error(where, fmt::format("the command ran over {:.0f} s and was killed", timeout_s));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFSIGNALED(status)) return make_error(where, fmt::format("the command was killed by signal {}", WTERMSIG(status)));
  if (WEXITSTATUS(status) != 0)
    return make_error(where, fmt::format("the command exited with status {}", WEXITSTATUS(status)),
                      WEXITSTATUS(status) == 127 ? "could it be started? it runs with /bin/sh -c" : "");
  return {};
}

}  // namespace

std::string energy_log_text(const std::vector<std::pair<int64_t, double>>& samples, const std::string& device, int rank) {
  std::string out = fmt::format("# emo-energy-log/1 device={} rank={}\nt_ns,energy_mj\n", device, rank);
  int64_t last_t = INT64_MIN;
  int64_t last_e = INT64_MIN;
  for (const auto& [t, j] : samples) {
    const int64_t e = std::max(last_e, int64_t(std::llround(j * 1e3)));
    if (t <= last_t) continue;
    out += fmt::format("{},{}\n", t, e);
    last_t = t;
    last_e = e;
  }
  return out;
}

Status profile_job(const ProfileJobOptions& o, AtomicDir& out) {
  if (o.clock == nullptr || o.meter == nullptr) return make_error("profile", "no clock control or energy counter");
  if (o.command.empty()) return make_error("--command", "is empty");
  if (o.clocks_mhz.empty()) return make_error("profile", "the plan has no clocks");
  const fs::path scratch_root = fs::path(out.tmp_path()).parent_path();
  for (int mhz : o.clocks_mhz) {
    const std::string where = fmt::format("{} MHz run", mhz);
    // The command writes into a scratch folder beside the output; its trace is copied in after.
    std::string tmpl = (scratch_root / ".emo-profile-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) return make_error(scratch_root.string(), "cannot create a scratch folder");
    const fs::path scratch = tmpl;
    struct Cleanup {
      fs::path p;
      ~Cleanup() {
        std::error_code ec;
        fs::remove_all(p, ec);
      }
    } cleanup{scratch};
    if (o.progress) o.progress(fmt::format("profiling at {} MHz: {}", mhz, o.command));
    if (Status st = o.clock->lock_sm_clock(mhz); !st.ok()) {
      (void)o.clock->reset_sm_clock();
      return st.error();
    }
    std::vector<std::pair<int64_t, double>> samples;
    // One reading before the command starts and one after it ends bound the log.
    auto first = o.meter->energy_j();
    if (!first) {
      (void)o.clock->reset_sm_clock();
      return make_error(where, "the energy counter failed: " + first.error().message());
    }
    samples.emplace_back(realtime_ns(), *first);
    std::atomic<bool> done{false};
    Error meter_error;
    std::atomic<bool> meter_failed{false};
    std::thread logger([&] {
      const auto period = std::chrono::duration<double, std::milli>(o.log_period_ms);
      while (true) {
        std::this_thread::sleep_for(period);
        auto e = o.meter->energy_j();
        if (!e) {
          meter_error = e.error();
          meter_failed = true;
          return;
        }
        samples.emplace_back(realtime_ns(), *e);
        if (done) return;  // the read after the command ended closes the log
      }
    });
    Status ran = run_command(o.command,
                             {{"EMO_PROFILE_DIR", scratch.string()},
                              {"EMO_PROFILE_CLOCK_MHZ", std::to_string(mhz)},
                              {"EMO_PROFILE_STEPS", std::to_string(o.steps)},
                              {"EMO_PROFILE_RANK", std::to_string(o.rank)}},
                             o.timeout_s, where);
    done = true;
    logger.join();
    Status reset = o.clock->reset_sm_clock();
    if (!ran.ok()) return ran;
    if (!reset.ok()) return reset;
    if (meter_failed) return make_error(where, "the energy counter failed: " + meter_error.message());
    // The trace the command wrote.
    std::string trace_name;
    for (const char* name : {"rank{}.json.gz", "rank{}.json"}) {
      const std::string n = fmt::format(fmt::runtime(name), o.rank);
      if (fs::is_regular_file(scratch / n)) trace_name = n;
    }
    if (trace_name.empty()) {
      return make_error(where, fmt::format("the command wrote no trace rank{}.json[.gz] into $EMO_PROFILE_DIR", o.rank),
                        "capture a few steps with torch.profiler and export_chrome_trace(os.environ['EMO_PROFILE_DIR'] + "
                        "'/rank0.json') (docs/profiling.md)");
    }
    auto text = read_file((scratch / trace_name).string());
    if (!text) return text.error();
    const std::string folder = fmt::format("{}mhz/", mhz);
    EMO_RETURN_IF_ERROR(out.write(folder + trace_name, *text));
    EMO_RETURN_IF_ERROR(out.write(folder + fmt::format("rank{}.energy.csv", o.rank), energy_log_text(samples, o.device_name, o.rank)));
  }
  return {};
}

}  // namespace emo::runtime
