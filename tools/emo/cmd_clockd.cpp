// `emo clockd --config FILE`: the node's clock daemon (emo/runtime/clockd.h, docs/clockd.md).
// `emo clockd --check FILE`: what it would serve, changing nothing. `emo clockd --client SOCKET ...`: a
// small client for admins to try it (status, or lock a GPU for a while).
#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>
#include <thread>

#include "cli_common.h"
#include "emo/runtime/clockd.h"

namespace emo::cli {

namespace {

struct ClockdArgs {
  std::string config;
  std::string check;
  std::string client;
  bool status = false;
  std::string lock;  // GPU:MHZ
  double hold_s = 0;
  int timeout_ms = 5000;
};

std::atomic<runtime::ClockdServer*> g_server{nullptr};
volatile std::sig_atomic_t g_stop_early = 0;  // a signal before the server was up
volatile std::sig_atomic_t g_stop_client = 0;

extern "C" void clockd_on_signal(int) {
  if (runtime::ClockdServer* s = g_server.load()) {
    s->stop();  // async-signal-safe: one write() to the server's pipe
  } else {
    g_stop_early = 1;
  }
}
extern "C" void clockd_client_on_signal(int) { g_stop_client = 1; }

void install(void (*handler)(int)) {
  struct sigaction sa {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) ::sigaction(sig, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
}

int run_daemon(const std::string& path) {
  auto cfg = runtime::read_clockd_config(path);
  if (!cfg) return fail(cfg.error());
  install(clockd_on_signal);
  auto server = runtime::ClockdServer::make(std::move(*cfg));
  if (!server) return fail(server.error());
  g_server.store(&*server);
  if (g_stop_early) server->stop();  // SIGTERM during start: reset (run_until_stopped does) and exit
  Status st = server->run_until_stopped();
  g_server.store(nullptr);
  if (!st.ok()) return fail(st.error());
  return kExitOk;
}

int run_check(const std::string& path) {
  auto cfg = runtime::read_clockd_config(path);
  if (!cfg) return fail(cfg.error());
  auto report = runtime::check_clockd_config(*cfg);
  if (!report) return fail(report.error());
  std::fputs(report->c_str(), stdout);
  return kExitOk;
}

int run_client(const ClockdArgs& a) {
  if (a.status || a.lock.empty()) {
    auto s = runtime::clockd_status(a.client, a.timeout_ms);
    if (!s) return fail(s.error());
    std::printf("%s\n", s->c_str());
    return kExitOk;
  }
  const size_t colon = a.lock.find(':');
  int gpu = -1, mhz = -1;
  try {
    if (colon == std::string::npos) throw std::invalid_argument("no colon");
    size_t used = 0;
    gpu = std::stoi(a.lock.substr(0, colon), &used);
    if (used != colon) throw std::invalid_argument("gpu");
    const std::string m = a.lock.substr(colon + 1);
    mhz = std::stoi(m, &used);
    if (used != m.size()) throw std::invalid_argument("mhz");
  } catch (const std::exception&) {
    return fail(make_error("--lock " + a.lock, "expected GPU:MHZ", "e.g. --lock 0:1410 (gpu 0 of the daemon's config, 1410 MHz)"));
  }
  if (gpu < 0 || mhz <= 0) return fail(make_error("--lock " + a.lock, "expected GPU:MHZ with GPU >= 0 and MHZ > 0"));
  install(clockd_client_on_signal);
  runtime::ClockdClient::Options o;
  o.client = "emo-clockd-cli";
  o.timeout_ms = a.timeout_ms;
  auto c = runtime::ClockdClient::connect(a.client, gpu, o);
  if (!c) return fail(c.error());
  Status st = (*c)->lock_sm_clock(mhz);
  if (!st.ok()) return fail(st.error());
  std::printf("locked gpu %d at %d MHz through %s (lease %d ms, renewed every %d ms)\n", gpu, mhz, a.client.c_str(),
              (*c)->lease_ms(), (*c)->lease_ms() / 3);
  std::fflush(stdout);
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(a.hold_s);
  while (!g_stop_client && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  Status rel = (*c)->release();
  if (!rel.ok()) return fail(rel.error());
  std::printf("reset and released gpu %d\n", gpu);
  return kExitOk;
}

constexpr const char* kFooter = R"(
Config (JSON; every key but "gpus" optional):
  {"socket": "/run/emo/clockd.sock",  the Unix socket clients connect to
   "group": "emo",                    who may connect (socket 0660 + SO_PEERCRED check); absent: root only
   "lease_ms": 5000,                  a lease not renewed for this long expires: its GPU is reset
   "log": "/var/log/emo-clockd.log",  every change, one line each (absent: stderr)
   "max_clients": 64,
   "gpus": [{"device": "nvml:0", "min_mhz": 1005, "max_mhz": 1980}]}   protocol gpu G = gpus[G]
Protocol: one JSON object per line (at most 4096 bytes), one reply line each, {"ok":true,...} or
{"ok":false,"error":...,"note":...}. Ops: hello {client}, acquire {gpu}, lock {gpu,mhz}, reset {gpu},
renew, release {gpu}, status. One lease per GPU; a connection that closes (or a process killed with
SIGKILL) or a lease not renewed has its GPUs reset. At start and on SIGTERM/SIGINT/SIGHUP every GPU is
reset. A reset that fails is logged, retried and makes the daemon exit 1. See docs/clockd.md.)";

}  // namespace

void add_clockd(CLI::App& root, Action& action) {
  auto a = std::make_shared<ClockdArgs>();
  auto* sub = root.add_subcommand("clockd",
                                  "The node's clock daemon: the one privileged process; jobs lock and reset SM clocks "
                                  "through it over a Unix socket (leases, admin ranges, every change logged).");
  auto* config = sub->add_option("--config", a->config, "run the daemon with this config file (JSON)")->check(CLI::ExistingFile);
  auto* check = sub->add_option("--check", a->check, "validate this config, open its GPUs and print what would be served; changes nothing")
                    ->check(CLI::ExistingFile);
  auto* client = sub->add_option("--client", a->client, "talk to a running daemon at this socket (with --status or --lock)");
  sub->add_flag("--status", a->status, "with --client: print the daemon's status (JSON)");
  sub->add_option("--lock", a->lock, "with --client: acquire GPU, lock it to MHZ, hold it --hold-s seconds, then reset and release")
      ->type_name("GPU:MHZ");
  sub->add_option("--hold-s", a->hold_s, "with --lock: seconds to hold the lock (renewing the lease); SIGTERM/Ctrl-C ends it early")
      ->check(CLI::Range(0.0, 1e7));
  sub->add_option("--timeout-ms", a->timeout_ms, "with --client: the longest wait for the daemon, per request")->check(CLI::Range(1, 600000));
  config->excludes(check)->excludes(client);
  check->excludes(client);
  sub->footer(kFooter);
  sub->callback([a, &action] {
    if (a->config.empty() && a->check.empty() && a->client.empty())
      throw CLI::RequiredError("one of --config FILE, --check FILE or --client SOCKET");
    if (a->client.empty() && (a->status || !a->lock.empty()))
      throw CLI::ValidationError("--status/--lock", "need --client SOCKET");
    if (a->status && !a->lock.empty()) throw CLI::ValidationError("--status", "excludes --lock");
    action = [a] {
      if (!a->config.empty()) return run_daemon(a->config);
      if (!a->check.empty()) return run_check(a->check);
      return run_client(*a);
    };
  });
}

}  // namespace emo::cli
