// error:/note:/warning: printing shared by every subcommand.
#include "cli_common.h"

#include <charconv>
#include <cstdio>

#include "emo/dist/dist.h"

namespace emo::cli {

int fail(const Error& e) {
  std::fprintf(stderr, "error: %s\n", e.message().c_str());
  if (!e.note.empty()) std::fprintf(stderr, "note: %s\n", e.note.c_str());
  return kExitBadInput;
}

void warn(const std::string& message) { std::fprintf(stderr, "warning: %s\n", message.c_str()); }

Status set_step(const std::optional<int64_t>& step, std::optional<int64_t>& into) {
  if (step && *step < 0) return make_error("--step", "must be a ProfilerStep number, 0 or more", "leave it out for the last complete step");
  into = step;
  return {};
}

Result<std::vector<int>> parse_clock_list(const std::string& text, const std::string& flag) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(pos, comma - pos);
    int v = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || p != item.data() + item.size() || v <= 0)
      return make_error(flag, "'" + item + "' is not a clock in MHz", "write the clocks as A,B,C, e.g. 855,1140,1410");
    out.push_back(v);
    pos = comma + 1;
  }
  return out;
}

namespace {
std::optional<std::vector<std::string>> g_noted;
}  // namespace

std::optional<int> serve_if_worker(const std::vector<std::string>& traces, const analysis::LoadOptions& load) {
  dist::Comm& world = dist::world();
  if (world.size() < 2) return std::nullopt;
  if (world.is_root()) {
    g_noted = traces;
    return std::nullopt;
  }
  Status st = analysis::serve_shard(traces, load, world);
  return st.ok() ? kExitOk : fail(st.error());
}

int end_run(int rc) {
  dist::Comm& world = dist::world();
  // A wait that ran out (a process stuck, or much slower): the processes may wait on each other; end them.
  if (world.size() > 1 && world.is_root() && rc != kExitOk && dist::waits_failed()) dist::abort_run(rc);
  if (world.size() < 2 || !world.is_root() || !g_noted) return rc;
  // A failure before the traces were read leaves the others' shards unreceived: drain them, else end the
  // run (no process is left waiting).
  if (Status st = analysis::drain_shards(*g_noted, world); !st.ok()) {
    fail(st.error());
    dist::abort_run(kExitBadInput);
  }
  return rc;
}

}  // namespace emo::cli
