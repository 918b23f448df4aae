// The processes of one run (DESIGN.md §9, docs/mpi.md). Under `mpirun -np P emo analyze|whatif|pack|
// optimize|evaluate|run TRACE...` each process reads a contiguous shard of the rank files and restricts
// them to the step. `analyze`, `whatif` and `pack` keep each process's part of the ranks where it is:
// each builds, replays, analyzes (and packs) its part (analysis::load_part, pack::make_packs_part) and
// process 0 joins what they report; the other subcommands hand the compact tables to process 0, which
// assembles the step and runs the rest of the pipeline (the fit of recorded runs, the optimizer and its
// policy file have their parts too, not yet used there: pack::fit_pack_models_part, optimize::optimize_part,
// optimize::policy_json_part).
// Only process 0 prints and writes. Without MPI, or without a launcher, the world is this process alone
// and nothing changes.
//
// Every wait is bounded (timeout_s()); a process that cannot go on ends the run with one `error:`
// from process 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "emo/base/result.h"

namespace emo::dist {

inline constexpr int kRoot = 0;

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  bool is_root() const { return rank() == kRoot; }
  // Sends `bytes` to process `to` under `tag` without waiting for it to be received (the comm keeps them
  // until then: flush() waits).
  virtual Status send(int to, int tag, std::string bytes) = 0;
  // Waits until every message sent is received; an Error after `timeout_s`.
  virtual Status flush(double timeout_s) = 0;
  // The next message from process `from` under `tag`, in the order sent; an Error after `timeout_s`.
  virtual Result<std::string> recv(int from, int tag, double timeout_s) = 0;
  // The next message under `tag` from whichever process sends first, with its sender (messages of one
  // sender in the order sent); an Error after `timeout_s`.
  virtual Result<std::pair<int, std::string>> recv_any(int tag, double timeout_s) = 0;
};

// This process alone (size 1).
Comm& self();
// The run's processes: MPI's world where init() started MPI, else self().
Comm& world();

// Starts MPI when this process was started by an MPI launcher (mpirun, mpiexec, srun --mpi) and emo was
// built with MPI. An Error when a launcher started several processes of an emo built without MPI.
Status init(int* argc, char*** argv);
// Ends MPI where init() started it (after the last message).
void finalize();
bool built_with_mpi();
// Whether a wait of this process for another's message under MPI ran out (the other may be stuck, and
// the others may wait on this one: a run that failed so must be aborted, not finalized).
bool waits_failed();
// Ends every process of the run now with `code` (MPI_Abort; std::exit in one process): for a run where a
// process may be left waiting on another.
[[noreturn]] void abort_run(int code);
// Seconds any wait for another process may last: EMO_MPI_TIMEOUT_S when set to a positive number,
// else 600.
double timeout_s();

// The part [begin, end) of n items that process p of `size` takes: contiguous, sizes differing by one at
// most, earlier processes taking the larger parts.
std::pair<size_t, size_t> shard(size_t n, int p, int size);

// Contiguous parts of items of these weights (bytes of files) for `size` processes, as size + 1 bounds
// (process p takes [bounds[p], bounds[p + 1])): an item goes to the process whose equal share of the total
// weight holds the item's middle, so every part weighs about total/size, give or take one item.
std::vector<size_t> shard_by_weight(const std::vector<uint64_t>& weights, int size);

// `size` communicators over one process's memory, one per thread (tests of the protocol without a
// launcher): comm i is process i; messages go through shared queues.
std::vector<std::unique_ptr<Comm>> local_world(int size);

// Every process gives `mine`; process 0 combines all of them (in process order: `parts[p]` is process p's)
// and every process gets the combination. Every process of the run calls it with the same `tag`, which no
// other exchange of theirs uses at the time. An Error where a process sends nothing for timeout_s().
Result<std::vector<int64_t>> all_combine(
    Comm& comm, int tag, const std::vector<int64_t>& mine,
    const std::function<std::vector<int64_t>(const std::vector<std::vector<int64_t>>& parts)>& combine);

// Every process's `mine`, in process order, to every process (gathered at process 0, sent back framed).
Result<std::vector<std::string>> all_gather(Comm& comm, int tag, std::string mine);

// Every process's status, to every process: the Error of the first process (in process order) that
// failed, the same on every process (where, what and note), or ok where none did. For a step that each
// process does on its own part and that can fail on one of them, before an exchange the others would
// otherwise wait in. An Error also where the exchange itself fails.
Status first_error(Comm& comm, int tag, const Status& mine);

// The upper median (emo/base/stats.h: the value at index n/2 of the sorted values) of each of several
// sets of values that lie with several processes, `values[k]` this process's part of set k (every process
// gives as many sets); `fallback` for a set that is empty on every process. Exact, without gathering the
// values: a bisection over the values' range, each step one all_combine of counts (at most 65).
// Reorders each part (sorts it).
Result<std::vector<int64_t>> upper_medians(Comm& comm, int tag, std::vector<std::vector<int64_t>>& values,
                                           int64_t fallback);

// Integers as a message's bytes (this machine's byte order: every process of a run is one build), and back
// (an Error naming process `from` when the bytes are not whole integers).
std::string to_bytes(const std::vector<int64_t>& v);
Result<std::vector<int64_t>> from_bytes(std::string_view bytes, int from);

// Fields framed as bytes, and back (an Error when `bytes` is not such a frame).
std::string frame(const std::vector<std::string_view>& fields);
Result<std::vector<std::string_view>> unframe(std::string_view bytes);

}  // namespace emo::dist
