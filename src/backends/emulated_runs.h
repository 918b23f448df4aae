// The profiling plan run on the emulated GPU: one run per plan clock (shared by profile_plan, which
// parses the runs in memory, and write_profiled_dir, which writes them to disk).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "emo/analysis/analysis.h"
#include "emo/base/result.h"
#include "emo/emulator/emulator.h"
#include "emo/pack/pack.h"

namespace emo::backends::detail {

Result<std::vector<std::pair<int, emulator::RunResult>>> emulated_plan_runs(const std::string& device_spec,
                                                                            const analysis::Workload& w,
                                                                            const pack::Packing& packing);

}  // namespace emo::backends::detail
