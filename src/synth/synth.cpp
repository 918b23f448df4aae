// `emo synth` entry points: option checks, sizing a trace to a minimum event
// count, and running the lockstep simulation into strings or files. Files are
// streamed through AtomicFile in chunks, so a killed run leaves no file behind
// that looks complete and a 1 M-event trace never sits in memory whole.
#include "emo/synth/synth.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <system_error>

#include "kineto_writer.h"
#include "simulator.h"
#include "workloads.h"

namespace emo::synth {
namespace {

constexpr int kMaxRanks = 512;  // one open file per rank while writing
constexpr int kMaxLayers = 10'000'000;
constexpr int kMaxSteps = 100'000;
constexpr int kMaxDecodeTokens = 100'000;

std::string file_name(const Options& o, int rank) {
  return fmt::format("{}_rank{}.json", workload_name(o.workload), rank);
}

// Runs the workload for every rank, writing rank r into sinks[r]. Returns the
// event count of each rank's trace.
std::vector<int64_t> simulate(const Options& o, int layers, std::vector<detail::TraceSink*>& sinks) {
  using namespace detail;
  Catalog cat = make_catalog();
  std::vector<std::unique_ptr<KinetoWriter>> writers;
  SimConfig cfg;
  cfg.ranks = o.ranks;
  cfg.seed = o.seed;
  cfg.kernels = &cat.kernels;
  cfg.names = &cat.names;
  cfg.args = &cat.args;
  std::vector<std::string> names;
  for (int r = 0; r < o.ranks; ++r) {
    writers.push_back(std::make_unique<KinetoWriter>(sinks[static_cast<size_t>(r)], rank_pid(r),
                                                     rank_pid(r), rank_device(r)));
    cfg.writers.push_back(writers.back().get());
    names.push_back(file_name(o, r));
    TraceHeader h;
    h.rank = r;
    h.world_size = o.ranks;
    h.num_devices = std::min(o.ranks, 8);
    h.trace_name = names.back();
    h.trace_id = mix_seed(o.seed, 1000 + static_cast<uint64_t>(r));
    h.record_shapes = true;
    writers.back()->header(h);
  }
  Sim sim(std::move(cfg));
  ProgramShape shape;
  shape.layers = layers;
  shape.steps = o.steps;
  shape.decode_tokens = o.decode_tokens;
  if (o.workload == Workload::kTrainDP) {
    run_train_dp(sim, cat, shape);
  } else {
    run_infer_decode(sim, cat, shape);
  }
  sim.finish(names);
  std::vector<int64_t> counts;
  for (auto& w : writers) counts.push_back(w->events());
  return counts;
}

// Events per file without formatting anything. Every rank has the same
// structure, and ranks >= 2 all behave alike, so two ranks suffice.
int64_t dry_count(const Options& o, int layers) {
  Options small = o;
  small.ranks = std::min(o.ranks, 2);
  std::vector<detail::TraceSink> sinks;
  for (int r = 0; r < small.ranks; ++r) sinks.push_back(detail::TraceSink::counting());
  std::vector<detail::TraceSink*> ptrs;
  for (auto& s : sinks) ptrs.push_back(&s);
  return simulate(small, layers, ptrs)[0];
}

}  // namespace

Result<Workload> parse_workload(const std::string& name) {
  if (name == "train-dp") return Workload::kTrainDP;
  if (name == "infer-decode") return Workload::kInferDecode;
  return make_error("", "unknown workload '" + name + "'", "WORKLOAD is train-dp or infer-decode");
}

const char* workload_name(Workload w) { return w == Workload::kTrainDP ? "train-dp" : "infer-decode"; }

Status validate(const Options& o) {
  auto range = [](const char* flag, int64_t v, int64_t lo, int64_t hi) -> Status {
    if (v >= lo && v <= hi) return {};
    return make_error("", fmt::format("{} must be between {} and {}, got {}", flag, lo, hi, v));
  };
  EMO_RETURN_IF_ERROR(range("--ranks", o.ranks, 1, kMaxRanks));
  EMO_RETURN_IF_ERROR(range("--layers", o.layers, 1, kMaxLayers));
  EMO_RETURN_IF_ERROR(range("--steps", o.steps, 1, kMaxSteps));
  EMO_RETURN_IF_ERROR(range("--decode-tokens", o.decode_tokens, 1, kMaxDecodeTokens));
  EMO_RETURN_IF_ERROR(range("--min-events", o.min_events, 0, int64_t{2'000'000'000}));
  return {};
}

int resolve_layers(const Options& o) {
  if (o.min_events <= 0) return o.layers;
  // Events grow linearly with layers (up to bucket parity): fit on 1 and 2
  // layers, jump close, then step up until the count is reached.
  int64_t c1 = dry_count(o, 1), c2 = dry_count(o, 2);
  int64_t per = std::max<int64_t>(1, c2 - c1);
  int64_t base = c1 - per;
  int64_t want = (o.min_events - base + per - 1) / per;
  int layers = static_cast<int>(std::clamp<int64_t>(want, o.layers, kMaxLayers));
  for (int64_t have = dry_count(o, layers); have < o.min_events && layers < kMaxLayers;
       have = dry_count(o, layers)) {
    layers = static_cast<int>(std::min<int64_t>(kMaxLayers, layers + (o.min_events - have) / per + 1));
  }
  return layers;
}

int64_t count_events(const Options& o) {
  if (!validate(o).ok()) return 0;
  return dry_count(o, resolve_layers(o));
}

std::string render_trace(const Options& o, int rank) {
  if (!validate(o).ok() || rank < 0 || rank >= o.ranks) return {};
  std::string text;
  std::vector<detail::TraceSink> sinks;
  sinks.reserve(static_cast<size_t>(o.ranks));
  for (int r = 0; r < o.ranks; ++r) {
    sinks.push_back(r == rank ? detail::TraceSink::to_string(&text) : detail::TraceSink::counting());
  }
  std::vector<detail::TraceSink*> ptrs;
  for (auto& s : sinks) ptrs.push_back(&s);
  simulate(o, resolve_layers(o), ptrs);
  return text;
}

Status write_traces(const Options& o, const std::string& dir, std::vector<FileInfo>* files) {
  EMO_RETURN_IF_ERROR(validate(o));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    return make_error(dir, "cannot create output directory" + (ec ? ": " + ec.message() : std::string()),
                      "pass a writable directory with -o");
  }
  const int layers = resolve_layers(o);
  std::vector<std::unique_ptr<AtomicFile>> out;
  std::vector<detail::TraceSink> sinks;
  sinks.reserve(static_cast<size_t>(o.ranks));
  std::vector<std::string> paths;
  for (int r = 0; r < o.ranks; ++r) {
    paths.push_back((std::filesystem::path(dir) / file_name(o, r)).string());
    out.push_back(std::make_unique<AtomicFile>());
    EMO_RETURN_IF_ERROR(out.back()->open(paths.back()));
    // Chunk size shrinks with many ranks so the buffers stay under ~256 MiB together.
    size_t chunk = std::clamp<size_t>((size_t{256} << 20) / static_cast<size_t>(o.ranks), size_t{256} << 10,
                                      size_t{4} << 20);
    sinks.push_back(detail::TraceSink::to_file(out.back().get(), chunk));
  }
  std::vector<detail::TraceSink*> ptrs;
  for (auto& s : sinks) ptrs.push_back(&s);
  std::vector<int64_t> counts = simulate(o, layers, ptrs);
  // Commit only when every file was written whole; otherwise the AtomicFile
  // destructors remove all the temporaries.
  for (auto& s : sinks) {
    if (!s.status().ok()) return s.status().error();
  }
  if (files) files->clear();
  for (int r = 0; r < o.ranks; ++r) {
    EMO_RETURN_IF_ERROR(out[static_cast<size_t>(r)]->commit());
    if (files) {
      files->push_back(FileInfo{paths[static_cast<size_t>(r)], r, layers, counts[static_cast<size_t>(r)],
                                sinks[static_cast<size_t>(r)].bytes()});
    }
  }
  return {};
}

Status write_traces(const Options& o, const std::string& dir, std::vector<std::string>* files) {
  std::vector<FileInfo> info;
  EMO_RETURN_IF_ERROR(write_traces(o, dir, &info));
  if (files) {
    files->clear();
    for (auto& f : info) files->push_back(f.path);
  }
  return {};
}

}  // namespace emo::synth
