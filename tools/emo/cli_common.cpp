// error:/note:/warning: printing shared by every subcommand.
#include "cli_common.h"

#include <cstdio>

namespace emo::cli {

int fail(const Error& e) {
  std::fprintf(stderr, "error: %s\n", e.message().c_str());
  if (!e.note.empty()) std::fprintf(stderr, "note: %s\n", e.note.c_str());
  return kExitBadInput;
}

void warn(const std::string& message) { std::fprintf(stderr, "warning: %s\n", message.c_str()); }

}  // namespace emo::cli
