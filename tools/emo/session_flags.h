// The flags that the subcommands on the trace flow share (pack, profile, optimize), mapped onto a
// session's options; the session does the work.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "emo/base/result.h"
#include "emo/report/views.h"
#include "emo/session/session.h"

namespace emo::cli {

struct PackFlags {
  std::vector<std::string> traces;
  std::string device = "h100";
  std::optional<int64_t> step;
  double min_pack = 1.0;
  double min_pack_ms = -1;  // (only read when --min-pack-ms was given)
  CLI::Option* min_pack_ms_option = nullptr;
  double critical_us = 50;
  int clocks = 4;
  bool per_kernel = false;
  bool cpu_ops_as_kernels = false;
  bool deprofile = false;
  // Registers the flags on `sub` (the traces positional included).
  void add_to(CLI::App* sub, const std::string& device_help);
  // The session's options for these flags (the rest at their defaults).
  Result<session::Options> options() const;
};

// --deprofile on `sub`, into `into` (LoadOptions::deprofile).
void add_deprofile_flag(CLI::App* sub, bool& into);

// --no-refine-profile on `sub`, into `into` (session::Options::refine_profile, negated).
void add_no_refine_profile_flag(CLI::App* sub, bool& into);

// Renders `view` into `path` ('-' = stdout), replacing the file only once it is complete.
Status write_view(session::Session& s, const report::View& view, const std::string& path);
// Renders `view` to stdout.
Status print_view(session::Session& s, const report::View& view);

}  // namespace emo::cli
