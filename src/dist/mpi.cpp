// MPI's world (include/emo/dist/dist.h): point-to-point messages of bytes with bounded waits. Built only
// with EMO_HAVE_MPI; without it init() refuses a launch of several processes and the world is one.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "emo/dist/dist.h"
#include "mpi_world.h"

#if EMO_HAVE_MPI
#include <mpi.h>
#if defined(__linux__)
#include <sched.h>
#include <unistd.h>
#endif

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <thread>
#include <vector>
#endif

namespace emo::dist {

namespace {

// Set when a wait for another process ended without its message (waits_failed()).
std::atomic<bool> g_wait_failed{false};

// The number of processes a launcher says it started (0: not started by one).
int launched_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"}) {
    if (const char* v = std::getenv(name)) {
      const int n = std::atoi(v);
      if (n > 0) return n;
    }
  }
  return std::getenv("PMIX_RANK") || std::getenv("PMI_RANK") ? 2 : 0;
}

#if EMO_HAVE_MPI
std::string mpi_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return fmt::format("MPI error {}", code);
  return std::string(text, static_cast<size_t>(len));
}

// How long a process other than 0 waits, at the end, for process 0 to finish its stages.
constexpr double kRootWaitS = 24 * 3600.0;

// Messages larger than this go as several.
constexpr uint64_t kPiece = uint64_t{1} << 30;

class MpiComm final : public Comm {
 public:
  MpiComm() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  ~MpiComm() override { (void)flush(timeout_s()); }

  Status send(int to, int tag, std::string bytes) override {
    auto m = std::make_unique<Pending>();
    m->size = bytes.size();
    m->bytes = std::move(bytes);
    MPI_Request r;
    int rc = MPI_Isend(&m->size, 1, MPI_UINT64_T, to, tag, MPI_COMM_WORLD, &r);
    if (rc == MPI_SUCCESS) m->requests.push_back(r);
    for (uint64_t at = 0; rc == MPI_SUCCESS && at < m->size; at += kPiece) {
      const auto len = static_cast<int>(std::min(kPiece, m->size - at));
      rc = MPI_Isend(m->bytes.data() + at, len, MPI_BYTE, to, tag, MPI_COMM_WORLD, &r);
      if (rc == MPI_SUCCESS) m->requests.push_back(r);
    }
    pending_.push_back(std::move(m));
    if (rc != MPI_SUCCESS) return make_error("", fmt::format("sending to process {}: {}", to, mpi_text(rc)));
    return {};
  }

  Status flush(double timeout_s) override {
    const auto began = std::chrono::steady_clock::now();
    const auto deadline = began + std::chrono::duration<double>(timeout_s);
    while (!pending_.empty()) {
      Pending& m = *pending_.front();
      int done = 0;
      const int rc = MPI_Testall(static_cast<int>(m.requests.size()), m.requests.data(), &done, MPI_STATUSES_IGNORE);
      if (rc != MPI_SUCCESS) return make_error("", fmt::format("sending: {}", mpi_text(rc)));
      if (done) {
        pending_.pop_front();
        continue;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        g_wait_failed = true;
        return make_error("", fmt::format("process 0 received nothing for {:g} s", timeout_s),
                          "a process is stuck or much slower than the others; EMO_MPI_TIMEOUT_S sets the wait");
      }
      std::this_thread::sleep_for(pause_after(began));
    }
    return {};
  }

  Result<std::string> recv(int from, int tag, double timeout_s) override {
    auto from_ok = wait_for(from, tag, timeout_s);
    if (!from_ok.ok()) return from_ok.error();
    return receive(from, tag);
  }

  Result<std::pair<int, std::string>> recv_any(int tag, double timeout_s) override {
    auto from = wait_for(MPI_ANY_SOURCE, tag, timeout_s);
    if (!from.ok()) return from.error();
    auto m = receive(*from, tag);
    if (!m.ok()) return m.error();
    return std::pair<int, std::string>{*from, std::move(*m)};
  }

 private:
  struct Pending {
    uint64_t size = 0;
    std::string bytes;
    std::vector<MPI_Request> requests;
  };

  // The sleep between two polls of a wait that began at `began`: an eighth of the time waited so far, from
  // 20 µs to 5 ms. The exchanges of a shared replay or a path's walk are many short waits, each of which a
  // long sleep would stretch (a 5 ms step cost analyze 0.5 s at 2 processes); a process waiting for
  // seconds wakes at most 200 times a second, keeping the core for the processes at work.
  static std::chrono::microseconds pause_after(std::chrono::steady_clock::time_point began) {
    const auto waited = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - began);
    return std::clamp(waited / 8, std::chrono::microseconds(20), std::chrono::microseconds(5000));
  }

  // The sender of the next message under `tag` from `from` (MPI_ANY_SOURCE: from anyone).
  Result<int> wait_for(int from, int tag, double timeout_s) {
    const auto began = std::chrono::steady_clock::now();
    const auto deadline = began + std::chrono::duration<double>(timeout_s);
    for (;;) {
      int flag = 0;
      MPI_Status st;
      const int rc = MPI_Iprobe(from, tag, MPI_COMM_WORLD, &flag, &st);
      const std::string who = from == MPI_ANY_SOURCE ? "any process" : fmt::format("process {}", from);
      if (rc != MPI_SUCCESS) return make_error("", fmt::format("waiting for {}: {}", who, mpi_text(rc)));
      if (flag) return st.MPI_SOURCE;
      if (std::chrono::steady_clock::now() > deadline) {
        g_wait_failed = true;
        return make_error("", fmt::format("{} sent nothing for {:g} s", from == MPI_ANY_SOURCE ? "no process" : who, timeout_s),
                          "a process is stuck or much slower than the others; EMO_MPI_TIMEOUT_S sets the wait");
      }
      std::this_thread::sleep_for(pause_after(began));
    }
  }

  // The message whose header is next from `from` (its pieces follow it in order).
  Result<std::string> receive(int from, int tag) {
    uint64_t n = 0;
    int rc = MPI_Recv(&n, 1, MPI_UINT64_T, from, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    std::string out;
    if (rc == MPI_SUCCESS) out.resize(n);
    for (uint64_t at = 0; rc == MPI_SUCCESS && at < n; at += kPiece) {
      const auto len = static_cast<int>(std::min(kPiece, n - at));
      rc = MPI_Recv(out.data() + at, len, MPI_BYTE, from, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    if (rc != MPI_SUCCESS) return make_error("", fmt::format("receiving from process {}: {}", from, mpi_text(rc)));
    return out;
  }

  std::deque<std::unique_ptr<Pending>> pending_;
  int rank_ = 0, size_ = 1;
};

MpiComm* g_world = nullptr;

// mpirun binds each process to a core by default (up to 2 processes); process 0 runs the stages after
// the reading on every thread EMO_THREADS allows, so it takes back every CPU its cpuset allows (the
// kernel keeps a mask within the cpuset). The others keep their binding: they only read.
void unbind() {
#if defined(__linux__)
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus < 1) return;
  cpu_set_t* set = CPU_ALLOC(static_cast<size_t>(cpus));
  if (!set) return;
  const size_t bytes = CPU_ALLOC_SIZE(static_cast<size_t>(cpus));
  CPU_ZERO_S(bytes, set);
  for (long c = 0; c < cpus; ++c) CPU_SET_S(static_cast<size_t>(c), bytes, set);
  (void)sched_setaffinity(0, bytes, set);  // best effort: a refusal leaves the binding as it was
  CPU_FREE(set);
#endif
}
#endif

}  // namespace

namespace detail {
Comm* mpi_world() {
#if EMO_HAVE_MPI
  return g_world;
#else
  return nullptr;
#endif
}
}  // namespace detail

bool built_with_mpi() { return EMO_HAVE_MPI != 0; }

bool waits_failed() { return g_wait_failed.load(); }

Status init(int* argc, char*** argv) {
  const int launched = launched_size();
#if EMO_HAVE_MPI
  if (launched == 0 || g_world) return {};
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
    return make_error("", "MPI did not start", "run emo under mpirun (or srun) of the MPI it was built with");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  g_world = new MpiComm();
  if (g_world->is_root() && !std::getenv("EMO_MPI_KEEP_BINDING")) unbind();
  return {};
#else
  (void)argc;
  (void)argv;
  if (launched > 1)
    return make_error("", fmt::format("a launcher started {} processes, but this emo was built without MPI", launched),
                      "build emo with MPI (libopenmpi-dev, scripts/install-deps.sh), or run one process");
  return {};
#endif
}

void abort_run(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
#if EMO_HAVE_MPI
  if (g_world) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::exit(code);
}

void finalize() {
#if EMO_HAVE_MPI
  if (!g_world) return;
  // MPI_Finalize waits for every process, spinning a core while it does: the others wait here instead,
  // asleep between polls, until process 0 is done (so that a process that has served its shard does
  // not take a core from process 0's stages).
  constexpr int kTagDone = 1000;
  if (g_world->is_root()) {
    for (int p = 1; p < g_world->size(); ++p) (void)g_world->send(p, kTagDone, std::string());
    (void)g_world->flush(timeout_s());
  } else {
    (void)g_world->recv(kRoot, kTagDone, kRootWaitS);
  }
  delete g_world;
  g_world = nullptr;
  MPI_Finalize();
#endif
}

}  // namespace emo::dist
