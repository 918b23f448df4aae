// emo: command-line entry. Each subcommand lives in its own cmd_*.cpp file.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli_common.h"
#include "emo/device/device.h"
#include "emo/dist/dist.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMO_CLI_UNDER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(EMO_CLI_UNDER_ASAN)
#define EMO_CLI_UNDER_ASAN 1
#endif
#if defined(__linux__) && defined(__GLIBC__) && !defined(EMO_CLI_UNDER_ASAN)
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#define EMO_CLI_TUNE_MALLOC 1
#endif

namespace {

// emo is a short-lived process that builds tables (events, graph, replay) of up to hundreds of MB
// and frees them at exit. glibc's defaults map each big table on its own, fault it in 4 KiB at a
// time and unmap it when freed, so the next table faults its pages in again: on a 3 MB trace that
// was a fifth of `emo analyze`. Here every allocation comes from the one heap, which is never
// trimmed (freed tables are reused without a fault), is grown 256 MiB ahead (an untouched reserve
// costs no memory) and is advised to use transparent huge pages (one fault per 2 MiB).
void tune_allocator() {
#if EMO_CLI_TUNE_MALLOC
  constexpr size_t kReserve = size_t{256} << 20, kHuge = size_t{2} << 20;
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, static_cast<int>(kReserve));
  // An allocation bigger than what is left of the heap grows it by the reserve now.
  const auto before = reinterpret_cast<uintptr_t>(sbrk(0));
  void* volatile probe = std::malloc(kHuge);  // volatile: the pair must not be optimized away
  std::free(probe);
  const auto after = reinterpret_cast<uintptr_t>(sbrk(0));
  const uintptr_t begin = (before + kHuge - 1) / kHuge * kHuge;
  if (after > begin + kHuge) madvise(reinterpret_cast<void*>(begin), after - begin, MADV_HUGEPAGE);  // advice only
#endif
}

}  // namespace

static int run_cli(int argc, char** argv, const emo::dist::Comm& world) {
  CLI::App app{
      "EMO: lowers the GPU energy of AI workloads within a latency target, from their own "
      "PyTorch profiler (Kineto) traces."};
  app.require_subcommand(1);
  app.footer(
      "Under an MPI launcher (mpirun -np P emo ...), analyze, whatif, pack, profile, optimize, evaluate and run share "
      "the reading of the rank files among the processes; process 0 prints and writes (docs/mpi.md). "
      "EMO_THREADS caps the threads of one process; EMO_MPI_TIMEOUT_S (default 600) bounds every wait between "
      "processes.");

  app.set_version_flag("--version", "emo 0.1.0");
  emo::cli::Action action;
  emo::cli::add_analyze(app, action);
  emo::cli::add_whatif(app, action);
  emo::cli::add_synth(app, action);
  emo::cli::add_deprofile(app, action);
  emo::cli::add_devices(app, action);
  emo::cli::add_model_check(app, action);
  emo::cli::add_pack(app, action);
  emo::cli::add_profile(app, action);
  emo::cli::add_optimize(app, action);
  emo::cli::add_evaluate(app, action);
  emo::cli::add_apply(app, action);
  emo::cli::add_run(app, action);
  emo::cli::add_pipeline(app, action);
  emo::cli::add_calibrate(app, action);
  emo::cli::add_clockd(app, action);
  // An empty argument is never a value EMO reads (CLI11 would take `--max-slowdown ""` as 0 and
  // `--step ""` as the default): a usage error naming what it was given to.
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] != '\0') continue;
    const bool after_flag = i > 1 && argv[i - 1][0] == '-' && argv[i - 1][1] != '\0';
    std::fprintf(stderr, "error: %s%s: empty argument\n", after_flag ? argv[i - 1] : "argument ",
                 after_flag ? "" : std::to_string(i).c_str());
    std::fprintf(stderr, "note: give a value, or leave the option out for its default\n");
    return emo::cli::kExitUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // Usage errors speak as every other error does: `error:` and a `note:` naming the help to read.
    const std::vector<CLI::App*> used = app.get_subcommands();
    const std::string name = used.empty() ? "emo" : "emo " + used.front()->get_name();
    std::fprintf(stderr, "error: %s\nnote: run `%s --help` for the options\n", e.what(), name.c_str());
    return emo::cli::kExitUsage;
  }
  // A folder among the trace files stands for the rank files in it, for every subcommand that reads
  // traces (before anything checks an output against its inputs or shares the files among processes).
  if (CLI::Option* traces = app.get_subcommands().front()->get_option_no_throw("traces");
      traces != nullptr && traces->count() > 0) {
    auto files = emo::analysis::expand_trace_paths(traces->results());
    if (!files.ok()) return emo::cli::fail(files.error());
    if (*files != traces->results()) {
      traces->clear();
      traces->add_result(*files);
      traces->run_callback();
    }
  }
  // Under MPI the processes other than 0 take part in the subcommands that read traces only.
  if (!world.is_root() && !emo::cli::shards_traces(app.get_subcommands().front()->get_name())) return emo::cli::kExitOk;
  try {
    const int rc = action ? action() : emo::cli::kExitUsage;
    // A locked clock that could not be reset was said on stderr where it happened; the run fails.
    return rc == 0 && emo::device::clock_reset_failures() > 0 ? emo::cli::kExitBadInput : rc;
  } catch (const std::exception& e) {
    // Library code reports errors as values; this is a last line of defence.
    std::fprintf(stderr, "error: internal: %s\n", e.what());
    return emo::cli::kExitBadInput;
  }
}

int main(int argc, char** argv) {
  tune_allocator();
  if (emo::Status st = emo::dist::init(&argc, &argv); !st.ok()) return emo::cli::fail(st.error());
  const emo::dist::Comm& world = emo::dist::world();
  // Only process 0 prints (the others' errors reach it as messages).
  if (!world.is_root()) {
    if (!std::freopen("/dev/null", "w", stdout) || !std::freopen("/dev/null", "w", stderr)) {
      // Nothing to print to: carry on quietly.
    }
  }
  const bool worker = !world.is_root();
  const int rc = emo::cli::end_run(run_cli(argc, argv, world));
  emo::dist::finalize();
  return worker ? emo::cli::kExitOk : rc;
}
