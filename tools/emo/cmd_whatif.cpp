// placeholder: being written
#include "cli_common.h"
namespace emo::cli {
void add_whatif(CLI::App& root, Action& action) {
  auto* sub = root.add_subcommand("whatif", "(being written)");
  sub->callback([&action] { action = [] { return kExitUsage; }; });
}
}  // namespace emo::cli
