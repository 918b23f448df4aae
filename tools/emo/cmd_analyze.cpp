// placeholder: being written
#include "cli_common.h"
namespace emo::cli {
void add_analyze(CLI::App& root, Action& action) {
  auto* sub = root.add_subcommand("analyze", "(being written)");
  sub->callback([&action] { action = [] { return kExitUsage; }; });
}
}  // namespace emo::cli
