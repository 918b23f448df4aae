// Profiling runs recorded on hardware (`emo profile --device nvml:N --command CMD`): for each clock of
// the profiling plan, the SM clock is locked (NVML as root, or through `emo clockd`), the user's command
// — the job, capturing a trace with torch.profiler — runs with EMO_PROFILE_DIR naming where its trace
// goes, and a thread logs the GPU's energy counter beside it; then the clock is reset. The result is
// the `--profiled DIR` folder of docs/profiling.md: <MHz>mhz/rank<R>.json[.gz] + rank<R>.energy.csv.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "emo/base/file_util.h"
#include "emo/base/result.h"
#include "emo/device/device.h"
#include "emo/runtime/clock_control.h"

namespace emo::runtime {

struct ProfileJobOptions {
  std::vector<int> clocks_mhz;  // the plan's clocks
  int steps = 0;                // steps the job should record at each clock (EMO_PROFILE_STEPS)
  int rank = 0;                 // the rank whose trace and energy log this run writes
  std::string command;          // run with /bin/sh -c, once per clock
  ClockControl* clock = nullptr;
  device::Device* meter = nullptr;  // its energy counter is logged
  std::string device_name;          // for the energy log's header ("h100")
  double log_period_ms = 10;        // energy counter reads
  double timeout_s = 3600;          // per clock; the command is killed after it
  std::function<void(const std::string&)> progress;
};

// Runs the command at every clock and writes the folder's files into `out` (not committed). The
// environment of each run: EMO_PROFILE_DIR (an empty folder for the trace, rank<R>.json or .json.gz),
// EMO_PROFILE_CLOCK_MHZ, EMO_PROFILE_STEPS, EMO_PROFILE_RANK. Errors: a failed lock or reset, a command
// that fails, times out or writes no trace; the clock is reset whatever happens.
Status profile_job(const ProfileJobOptions& options, AtomicDir& out);

// The energy log as docs/profiling.md reads it: "t_ns,energy_mj" rows (t_ns on CLOCK_REALTIME, the
// clock of Kineto's baseTimeNanoseconds), strictly increasing.
std::string energy_log_text(const std::vector<std::pair<int64_t, double>>& samples_ns_j, const std::string& device,
                            int rank);

}  // namespace emo::runtime
