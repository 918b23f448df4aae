// Profiling runs: the packing's plan run on the emulated GPU, or recorded on hardware and read from disk.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "emo/analysis/analysis.h"
#include "emo/backends/target.h"
#include "emo/base/result.h"
#include "emo/pack/fit.h"
#include "emo/pack/pack.h"

namespace emo::backends {

// Runs the packing's profiling plan on `on`: the step at each plan clock, `plan_steps` times, one traced
// step and the energy log per rank, each run digested (pack::digest_run) as it ends. Emulated devices only; on hardware record the traces at the plan's
// clocks (see docs/profiling.md) — any other device gives an Error saying so. `clocks`: these clocks
// instead of the plan's (one more run where the energy still falls, pack::energy_still_falling).
Result<std::vector<pack::ProfiledRun>> profile_plan(const Target& on, const analysis::Workload& w,
                                                    const pack::Packing& packing, const std::vector<int>& clocks = {});

// ---- profiling runs on disk (docs/profiling.md) ----
// A folder of profiling runs, one subfolder per locked clock, named "<MHz>mhz", each holding for every
// rank R of the step "rank<R>.json" (or .json.gz; a Kineto trace with at least one complete step) and
// "rank<R>.energy.csv" (the GPU's cumulative energy counter during the run at that clock: an optional
// "# ..." comment line, the header "t_ns,energy_mj", rows of absolute trace-clock ns and counter mJ).
// Hardware captures write this layout; `emo profile` writes it from the emulated GPU. With `packing`, each
// run is digested as it is read (pack::digest_run), so that only one run's traces are held at a time.
Result<std::vector<pack::ProfiledRun>> read_profiled_dir(const std::string& dir, const analysis::Workload& w,
                                                         const pack::Packing* packing = nullptr);
// read_profiled_dir() over the processes of a run (DESIGN.md §9), each with its part of the step
// (analysis::load_part) and its GPUs' packing (pack::PackingPart::mine): process 0 lists the folder and
// finds every rank's trace; each process reads its own ranks' traces at each clock as its part of the step
// was read (the same ranks) and their energy logs, and digests the run over the parts
// (pack::digest_run_part). The runs, ascending by clock, for pack::fit_pack_models_part(). Every process
// calls it; an Error on every process where any fails (the error read_profiled_dir() says first, for the
// folder and a missing trace).
Result<std::vector<pack::ProfiledRun>> read_profiled_dir_part(const std::string& dir, const graph::GraphPart& part,
                                                              const pack::Packing& mine, dist::Comm& comm);
// Runs the profiling plan (or `clocks`, when given) on an emulated device and writes the folder (built
// aside, renamed when complete).
Status write_profiled_dir(const Target& on, const analysis::Workload& w, const pack::Packing& packing,
                          const std::string& dir, const std::vector<int>& clocks = {});
// The energy log format above, parsed; errors name the file and line.
Result<std::vector<device::EnergySample>> parse_energy_log(std::string_view text, const std::string& name);

}  // namespace emo::backends
