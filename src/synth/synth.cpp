// `emo synth` entry points: option checks, sizing a trace to a minimum event
// count, and running the lockstep simulation into strings or files. Files are
// streamed through AtomicFile in chunks, so a killed run leaves no file behind
// that looks complete and a 1 M-event trace never sits in memory whole.
#include "emo/synth/synth.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <memory>
#include <system_error>

#include <sys/resource.h>

#include "kineto_writer.h"
#include "simulator.h"
#include "workloads.h"

namespace emo::synth {
namespace {

constexpr int kMaxRanks = 4096;  // one open file per rank while writing (raise_open_file_limit)
constexpr int kMaxLayers = 10'000'000;
constexpr int kMaxSteps = 100'000;
constexpr int kMaxDecodeTokens = 100'000;
constexpr int kMaxMicrobatches = 100'000;

std::string file_name(const Options& o, int rank) {
  return fmt::format("{}_rank{}.json", workload_name(o.workload), rank);
}

// Runs the workload for every rank, writing rank r into sinks[r]. Returns the
// event count of each rank's trace. `o` is already resolved (no min_events).
std::vector<int64_t> simulate(const Options& o, std::vector<detail::TraceSink*>& sinks) {
  using namespace detail;
  Catalog cat = make_catalog();
  std::vector<std::unique_ptr<KinetoWriter>> writers;
  SimConfig cfg;
  cfg.ranks = o.ranks;
  cfg.seed = o.seed;
  cfg.kernels = &cat.kernels;
  cfg.names = &cat.names;
  cfg.args = &cat.args;
  cfg.groups = process_groups(o.ranks, o.workload == Workload::kTrainPP ? pipeline_groups(o.ranks)
                                                                        : std::vector<GroupDef>{});
  std::vector<PgConfig> pg_config;
  for (const GroupDef& g : cfg.groups) pg_config.push_back(PgConfig{g.name, g.desc, g.ranks});
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
    if (cfg.groups.size() > 1) h.groups = pg_config;
    writers.back()->header(h);
  }
  Sim sim(std::move(cfg));
  ProgramShape shape;
  shape.layers = o.layers;
  shape.steps = o.steps;
  shape.decode_tokens = o.decode_tokens;
  shape.microbatches = o.microbatches;
  switch (o.workload) {
    case Workload::kTrainDP: run_train_dp(sim, cat, shape); break;
    case Workload::kTrainPP: run_train_pp(sim, cat, shape); break;
    case Workload::kTrainTP: run_train_tp(sim, cat, shape); break;
    case Workload::kInferDecode: run_infer_decode(sim, cat, shape); break;
    case Workload::kDataloader: run_dataloader(sim, cat, shape); break;
  }
  sim.finish(names);
  std::vector<int64_t> counts;
  for (auto& w : writers) counts.push_back(w->events());
  return counts;
}

// Events per file without formatting anything; where ranks differ, the
// smallest count. Pipeline stages differ, and tensor-parallel shards have
// optimizer launches by their size; elsewhere ranks >= 2 all behave alike, so
// two ranks suffice.
int64_t dry_count(const Options& o) {
  Options small = o;
  if (o.workload != Workload::kTrainPP && o.workload != Workload::kTrainTP) small.ranks = std::min(o.ranks, 2);
  std::vector<detail::TraceSink> sinks;
  for (int r = 0; r < small.ranks; ++r) sinks.push_back(detail::TraceSink::counting());
  std::vector<detail::TraceSink*> ptrs;
  for (auto& s : sinks) ptrs.push_back(&s);
  std::vector<int64_t> counts = simulate(small, ptrs);
  return *std::min_element(counts.begin(), counts.end());
}

// Every rank's file stays open while the ranks are simulated in lockstep: the soft limit on open files
// is raised towards the hard one when it is too low for that (1,024 is a common soft limit).
Status raise_open_file_limit(int ranks, const std::string& dir) {
  constexpr rlim_t kSpare = 64;  // the process's own files, the standard streams
  const rlim_t need = static_cast<rlim_t>(ranks) + kSpare;
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= need) return {};
  const rlim_t hard = lim.rlim_max;
  if (hard == RLIM_INFINITY || hard >= need) {
    lim.rlim_cur = need;
    if (setrlimit(RLIMIT_NOFILE, &lim) == 0) return {};
  }
  return make_error(dir, fmt::format("--ranks {} writes {} files at once, but this process may open only {} (ulimit -n)",
                                     ranks, ranks, static_cast<unsigned long long>(lim.rlim_cur)),
                    "raise the limit (ulimit -n), or write fewer ranks per run");
}

}  // namespace

Result<Workload> parse_workload(const std::string& name) {
  for (Workload w : kAllWorkloads) {
    if (name == workload_name(w)) return w;
  }
  return make_error("", "unknown workload '" + name + "'",
                    "WORKLOAD is one of train-dp, train-pp, train-tp, infer-decode, dataloader");
}

const char* workload_name(Workload w) {
  switch (w) {
    case Workload::kTrainDP: return "train-dp";
    case Workload::kTrainPP: return "train-pp";
    case Workload::kTrainTP: return "train-tp";
    case Workload::kInferDecode: return "infer-decode";
    case Workload::kDataloader: return "dataloader";
  }
  return "train-dp";
}

const char* workload_summary(Workload w) {
  switch (w) {
    case Workload::kTrainDP:
      return "data-parallel transformer training; gradient allreduce overlaps the backward pass";
    case Workload::kTrainPP:
      return "1F1B pipeline training, one stage per rank (--microbatches); send/recv, bubbles";
    case Workload::kTrainTP:
      return "tensor-parallel transformer layers; blocking allreduces on the critical path";
    case Workload::kInferDecode:
      return "LLM inference: prefill, then a CPU-launch-bound decode loop of small kernels";
    case Workload::kDataloader:
      return "CPU-bound input pipeline; each step waits for the DataLoader while the GPU idles";
  }
  return "";
}

Status validate(const Options& o) {
  auto range = [](const char* flag, int64_t v, int64_t lo, int64_t hi) -> Status {
    if (v >= lo && v <= hi) return {};
    return make_error("", fmt::format("{} must be between {} and {}, got {}", flag, lo, hi, v));
  };
  EMO_RETURN_IF_ERROR(range("--ranks", o.ranks, 1, kMaxRanks));
  EMO_RETURN_IF_ERROR(range("--layers", o.layers, 1, kMaxLayers));
  EMO_RETURN_IF_ERROR(range("--steps", o.steps, 1, kMaxSteps));
  EMO_RETURN_IF_ERROR(range("--decode-tokens", o.decode_tokens, 1, kMaxDecodeTokens));
  EMO_RETURN_IF_ERROR(range("--microbatches", o.microbatches, 1, kMaxMicrobatches));
  EMO_RETURN_IF_ERROR(range("--min-events", o.min_events, 0, int64_t{2'000'000'000}));
  return {};
}

Options resolve(const Options& o) {
  Options out = o;
  out.min_events = 0;
  if (o.min_events <= 0) return out;
  // Events grow linearly with the size knob (up to bucket parity): fit on 1
  // and 2, jump close, then step up until the count is reached.
  const bool by_steps = o.workload == Workload::kDataloader;
  int* knob = by_steps ? &out.steps : &out.layers;
  const int start = *knob, max = by_steps ? kMaxSteps : kMaxLayers;
  auto count_at = [&](int k) {
    *knob = k;
    return dry_count(out);
  };
  int64_t c1 = count_at(1), c2 = count_at(2);
  int64_t per = std::max<int64_t>(1, c2 - c1);
  int64_t base = c1 - per;
  int64_t want = (o.min_events - base + per - 1) / per;
  int k = static_cast<int>(std::clamp<int64_t>(want, start, max));
  for (int64_t have = count_at(k); have < o.min_events && k < max; have = count_at(k)) {
    k = static_cast<int>(std::min<int64_t>(max, k + (o.min_events - have) / per + 1));
  }
  *knob = k;
  return out;
}

int resolve_layers(const Options& o) { return resolve(o).layers; }

int64_t count_events(const Options& o) {
  if (!validate(o).ok()) return 0;
  return dry_count(resolve(o));
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
  simulate(resolve(o), ptrs);
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
  // Rank files of an earlier, larger run would be read with these as one step (DIR/*.json).
  std::vector<std::string> stale;
  const std::string prefix = std::string(workload_name(o.workload)) + "_rank";
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    size_t end = prefix.size();
    while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end]))) ++end;
    const std::string tail = name.substr(end);
    if (end == prefix.size() || end - prefix.size() > 6 || (tail != ".json" && tail != ".json.gz")) continue;
    if (std::stoi(name.substr(prefix.size(), end - prefix.size())) >= o.ranks) stale.push_back(name);
  }
  if (!stale.empty()) {
    std::sort(stale.begin(), stale.end());
    return make_error(dir, fmt::format("holds {}{} of an earlier run with more ranks than --ranks {}: they would be "
                                       "read with the new files as one step",
                                       stale.front(), stale.size() > 1 ? fmt::format(" and {} more", stale.size() - 1) : "",
                                       o.ranks),
                      "remove them, or give -o another folder");
  }
  EMO_RETURN_IF_ERROR(raise_open_file_limit(o.ranks, dir));
  const Options sized = resolve(o);
  std::vector<std::unique_ptr<AtomicFile>> out;
  std::vector<detail::TraceSink> sinks;
  sinks.reserve(static_cast<size_t>(o.ranks));
  std::vector<std::string> paths;
  for (int r = 0; r < o.ranks; ++r) {
    paths.push_back((std::filesystem::path(dir) / file_name(o, r)).string());
    out.push_back(std::make_unique<AtomicFile>());
    EMO_RETURN_IF_ERROR(out.back()->open(paths.back()));
    // Chunk size shrinks with many ranks so the buffers stay under ~256 MiB together.
    size_t chunk = std::clamp<size_t>((size_t{256} << 20) / static_cast<size_t>(o.ranks), size_t{64} << 10,
                                      size_t{4} << 20);
    sinks.push_back(detail::TraceSink::to_file(out.back().get(), chunk));
  }
  std::vector<detail::TraceSink*> ptrs;
  for (auto& s : sinks) ptrs.push_back(&s);
  std::vector<int64_t> counts = simulate(sized, ptrs);
  // Commit only when every file was written whole; otherwise the AtomicFile
  // destructors remove all the temporaries.
  for (auto& s : sinks) {
    if (!s.status().ok()) return s.status().error();
  }
  if (files) files->clear();
  for (int r = 0; r < o.ranks; ++r) {
    EMO_RETURN_IF_ERROR(out[static_cast<size_t>(r)]->commit());
    if (files) {
      files->push_back(FileInfo{paths[static_cast<size_t>(r)], r, sized.layers, sized.steps,
                                counts[static_cast<size_t>(r)], sinks[static_cast<size_t>(r)].bytes()});
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
