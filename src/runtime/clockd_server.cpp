// The `emo clockd` server: one thread, one poll() loop over the listening socket, a self-pipe (stop) and
// every client; non-blocking sockets with bounded buffers, leases timed by the loop's poll timeout.
// What a hostile client can do is bounded: a frame over kClockdMaxFrame bytes closes its connection, a
// client that does not read its replies is dropped once kMaxPendingOut bytes wait for it, connections
// beyond max_clients are refused, and whatever way a connection ends, the GPUs it held are reset.
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "emo/backends/target.h"
#include "emo/runtime/clockd.h"

namespace emo::runtime {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr size_t kMaxPendingOut = 64 * 1024;  // replies waiting for a client that does not read them
constexpr int kResetTries = 3;
constexpr const char* kOps = "hello, acquire, lock, reset, renew, release, status";

std::string errno_text(int e) { return std::strerror(e); }

// A reply line: compact JSON, invalid UTF-8 replaced (a client's bytes may be echoed).
std::string line_of(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n"; }

json err_reply(const std::string& what, const std::string& note = {}) {
  json j = {{"ok", false}, {"error", what}};
  if (!note.empty()) j["note"] = note;
  return j;
}

// For the log: one token, no spaces or quotes.
std::string sanitize(std::string_view s, size_t max_len) {
  std::string out;
  for (char ch : s.substr(0, max_len)) {
    const unsigned char u = static_cast<unsigned char>(ch);
    out += (std::isalnum(u) || ch == '.' || ch == '_' || ch == '-' || ch == ':' || ch == '@' || ch == '/') ? ch : '_';
  }
  return out.empty() ? "-" : out;
}

// A message in the log: quoted, one line.
std::string log_quote(std::string_view s) {
  std::string out = "\"";
  for (char ch : s.substr(0, 400)) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += (ch == '\n' || ch == '\r' || ch == '\t') ? ' ' : ch;
  }
  return out + "\"";
}

std::string range_text(const std::vector<int>& v) {
  if (v.empty()) return "none";
  return std::to_string(v.front()) + ".." + std::to_string(v.back()) + " MHz (" + std::to_string(v.size()) + " clocks)";
}

// The allowed clocks nearest `mhz`: "1395 or 1410 MHz".
std::string nearest_text(const std::vector<int>& allowed, int mhz) {
  auto it = std::lower_bound(allowed.begin(), allowed.end(), mhz);
  std::vector<int> pick;
  if (it != allowed.begin()) pick.push_back(*std::prev(it));
  if (it != allowed.end() && (pick.empty() || *it != pick.back())) pick.push_back(*it);
  std::string s;
  for (size_t i = 0; i < pick.size(); ++i) s += (i ? " or " : "") + std::to_string(pick[i]);
  return s + " MHz";
}

bool parse_uint(const std::string& s, uint32_t& out) {
  if (s.empty() || s.size() > 9) return false;
  uint32_t v = 0;
  for (char ch : s) {
    if (ch < '0' || ch > '9') return false;
    v = v * 10 + uint32_t(ch - '0');
  }
  out = v;
  return true;
}

// Is `uid` a member of `gid` (primary group or supplementary, as the user database says)?
bool user_in_group(uid_t uid, gid_t gid) {
  std::vector<char> buf(16384);
  struct passwd pw {};
  struct passwd* found = nullptr;
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) return false;
  if (pw.pw_gid == gid) return true;
  int n = 64;
  std::vector<gid_t> groups(static_cast<size_t>(n));
  for (int attempt = 0; attempt < 4; ++attempt) {
    int count = n;
    if (::getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &count) >= 0) {
      return std::find(groups.begin(), groups.begin() + count, gid) != groups.begin() + count;
    }
    n = std::max(count, n * 2);
    groups.resize(size_t(n));
  }
  return false;
}

Result<gid_t> resolve_group(const std::string& name, const std::string& where) {
  uint32_t numeric = 0;
  if (parse_uint(name, numeric)) return gid_t(numeric);
  std::vector<char> buf(16384);
  struct group gr {};
  struct group* found = nullptr;
  const int rc = ::getgrnam_r(name.c_str(), &gr, buf.data(), buf.size(), &found);
  if (rc != 0 || found == nullptr)
    return make_error(where + ":group", "no group named '" + name + "' on this node",
                      "create it (groupadd " + name + "), add the users who may steer clocks to it, or leave the key out (root only)");
  return gr.gr_gid;
}

void set_addr(sockaddr_un& addr, const std::string& path) {
  std::memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), std::min(path.size(), sizeof(addr.sun_path) - 1));
}

}  // namespace

struct ClockdServer::Impl {
  struct Gpu {
    int holder = 0;  // client id, 0: free
    Clock::time_point expires{};
    int locked_mhz = 0;  // 0: the default policy
    bool reset_pending = false;  // a reset failed: the clock may still be locked
    int reset_failures = 0;
    Clock::time_point next_retry{};
  };
  struct Client {
    int id = 0;
    int fd = -1;
    pid_t pid = 0;
    uid_t uid = 0;
    std::string name = "-";
    std::string in, out;
    bool closing = false;  // flush `out`, then close
    bool dead = false;     // close now
    std::set<int> expired;  // GPUs whose lease expired under this connection
  };

  ClockdConfig cfg;
  std::vector<std::unique_ptr<backends::Target>> targets;
  std::vector<device::Device*> devs;
  std::vector<std::vector<int>> allowed;
  std::vector<Gpu> gpus;
  std::map<int, Client> clients;
  int next_id = 1;
  int listen_fd = -1;
  dev_t sock_dev = 0;
  ino_t sock_ino = 0;
  int stop_r = -1, stop_w = -1;
  std::FILE* log = nullptr;
  bool own_log = false;
  bool has_group = false;
  gid_t gid = 0;
  std::atomic<int> failures{0};
  bool finished = false;
  Status final_status;

  ~Impl() {
    if (!finished) (void)shutdown("the daemon object was destroyed");
    if (stop_r >= 0) ::close(stop_r);
    if (stop_w >= 0) ::close(stop_w);
    if (own_log && log) std::fclose(log);
  }

  // ---- the log -------------------------------------------------------------------------------------
  void log_line(const std::string& fields) {
    const auto now = std::chrono::system_clock::now();
    const std::time_t t = std::chrono::system_clock::to_time_t(now);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
    std::tm tm {};
    ::gmtime_r(&t, &tm);
    char stamp[40];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    std::FILE* f = log ? log : stderr;
    std::fprintf(f, "%s.%03dZ emo-clockd %s\n", stamp, int(ms), fields.c_str());
    std::fflush(f);
  }
  static std::string who(const Client* c) {
    if (!c) return "pid=- uid=- client=daemon";
    return "pid=" + std::to_string(c->pid) + " uid=" + std::to_string(c->uid) + " client=" + c->name;
  }
  std::string gpu_text(int g) const { return "gpu=" + std::to_string(g) + " device=" + cfg.gpus[size_t(g)].device; }
  void log_op(const Client* c, int g, const std::string& op, int mhz, const std::string& result) {
    std::string s = who(c) + " ";
    s += g >= 0 ? gpu_text(g) : "gpu=-";
    s += " op=" + op + " mhz=" + (mhz > 0 ? std::to_string(mhz) : std::string("-")) + " result=" + result;
    log_line(s);
  }

  // ---- resets --------------------------------------------------------------------------------------
  // Resets GPU g, trying kResetTries times; a failure is logged, counted and returned.
  Status reset_gpu(int g, const Client* c, const std::string& op, bool count = true) {
    Gpu& gpu = gpus[size_t(g)];
    Status st;
    for (int i = 0; i < kResetTries; ++i) {
      if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(50 * i));
      st = devs[size_t(g)]->reset_sm_clock();
      if (st.ok()) break;
      log_op(c, g, op, 0, "error try=" + std::to_string(i + 1) + "/" + std::to_string(kResetTries) + " " + log_quote(st.error().message()));
    }
    if (st.ok()) {
      gpu.locked_mhz = 0;
      gpu.reset_pending = false;
      log_op(c, g, op, 0, "ok");
      return {};
    }
    gpu.reset_pending = true;
    gpu.next_retry = Clock::now() + std::chrono::milliseconds(std::max(cfg.lease_ms, 1000));
    if (count) {
      ++gpu.reset_failures;
      failures.fetch_add(1);
    }
    log_op(c, g, op, 0, "FAILED " + log_quote("the SM clock could not be reset after " + std::to_string(kResetTries) + " tries"));
    return make_error("gpu " + std::to_string(g) + " (" + cfg.gpus[size_t(g)].device + ")",
                      "the SM clock could not be reset after " + std::to_string(kResetTries) + " tries: " + st.error().message(),
                      "the daemon keeps retrying; reset it by hand as root (nvidia-smi -rgc) if it persists");
  }

  // Frees every lease `c` holds, resetting the GPUs it locked.
  void drop_leases(Client& c, const std::string& op) {
    for (size_t g = 0; g < gpus.size(); ++g) {
      if (gpus[g].holder != c.id) continue;
      if (gpus[g].locked_mhz != 0 || gpus[g].reset_pending) {
        (void)reset_gpu(int(g), &c, op);
      } else {
        log_op(&c, int(g), op, 0, "ok");
      }
      gpus[g].holder = 0;
    }
  }

  // ---- the socket ----------------------------------------------------------------------------------
  Status bind_socket() {
    const std::string& path = cfg.socket;
    const std::string where = cfg.source.empty() ? path : cfg.source + ":socket " + path;
    if (path.empty() || path.size() >= sizeof(sockaddr_un::sun_path))
      return make_error(where, "not a usable Unix socket path (1 to 107 bytes)");
    sockaddr_un addr {};
    set_addr(addr, path);
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) {
      if (!S_ISSOCK(st.st_mode))
        return make_error(where, "exists and is not a socket; emo clockd removes only a stale socket there",
                          "remove it yourself if nothing needs it, or set another \"socket\" in the config");
      // A socket: stale, or another daemon's?
      const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (probe < 0) return make_error(where, "socket(): " + errno_text(errno));
      const int rc = ::connect(probe, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
      const int e = errno;
      ::close(probe);
      if (rc == 0 || e == EAGAIN || e == EINPROGRESS)
        return make_error(where, "another emo clockd is listening on this socket", "stop it first (systemctl stop emo-clockd)");
      if (e != ECONNREFUSED) return make_error(where, "cannot probe the existing socket: " + errno_text(e));
      if (::unlink(path.c_str()) != 0) return make_error(where, "cannot remove the stale socket: " + errno_text(errno));
      log_line("pid=- uid=- client=daemon op=remove-stale-socket path=" + path + " result=ok");
    } else if (errno != ENOENT) {
      return make_error(where, "cannot stat: " + errno_text(errno));
    }
    listen_fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (listen_fd < 0) return make_error(where, "socket(): " + errno_text(errno));
    if (::bind(listen_fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
      const int e = errno;
      return make_error(where, "cannot bind: " + errno_text(e),
                        e == ENOENT ? "create its folder first (the systemd unit's RuntimeDirectory=emo makes /run/emo)" : "");
    }
    if (::lstat(path.c_str(), &st) == 0) {
      sock_dev = st.st_dev;
      sock_ino = st.st_ino;
    }
    // Who may connect is checked again on every connection (SO_PEERCRED); the mode is the first gate.
    if (::chmod(path.c_str(), has_group ? 0660 : 0600) != 0) return make_error(where, "chmod: " + errno_text(errno));
    if (has_group && ::chown(path.c_str(), uid_t(-1), gid) != 0)
      return make_error(where, "cannot give the socket to group " + cfg.group + ": " + errno_text(errno),
                        "run the daemon as root, or as a member of that group");
    return {};  // listen() comes once every GPU is reset: until then a client is refused
  }

  void remove_socket() {
    if (listen_fd < 0) return;
    ::close(listen_fd);
    listen_fd = -1;
    // Only our own socket: another daemon may have replaced it since.
    struct stat st {};
    if (::lstat(cfg.socket.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) && st.st_dev == sock_dev && st.st_ino == sock_ino)
      ::unlink(cfg.socket.c_str());
  }

  bool peer_allowed(uid_t uid, gid_t peer_gid) const {
    if (uid == 0 || uid == ::geteuid()) return true;
    if (!has_group) return false;
    return peer_gid == gid || user_in_group(uid, gid);
  }

  // ---- clients -------------------------------------------------------------------------------------
  void flush(Client& c) {
    while (!c.out.empty()) {
      const ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        c.out.erase(0, size_t(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      c.dead = true;  // the peer is gone
      return;
    }
    if (c.out.size() > kMaxPendingOut) {
      log_line(who(&c) + " op=drop result=denied " + log_quote("the client does not read its replies"));
      c.dead = true;
    }
    if (c.out.empty() && c.closing) c.dead = true;
  }

  void reply(Client& c, const json& j) {
    c.out += line_of(j);
    flush(c);
  }

  void accept_clients() {
    for (int i = 0; i < 64; ++i) {
      const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE) {
          // Out of descriptors: the pending connection stays queued; do not spin on it.
          log_line("pid=- uid=- client=daemon op=accept result=error " + log_quote(errno_text(errno)));
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        return;  // EAGAIN, or a connection gone before we took it
      }
      struct ucred cr {};
      socklen_t len = sizeof cr;
      if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0) {
        ::close(fd);
        continue;
      }
      Client c;
      c.id = next_id++;
      c.fd = fd;
      c.pid = cr.pid;
      c.uid = cr.uid;
      auto refuse = [&](const std::string& what, const std::string& note) {
        const std::string line = line_of(err_reply(what, note));
        (void)!::send(fd, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        log_line(who(&c) + " op=connect result=denied " + log_quote(what));
        ::close(fd);
      };
      if (!peer_allowed(cr.uid, cr.gid)) {
        refuse("permission denied: uid " + std::to_string(cr.uid) + " may not steer clocks here",
               has_group ? "the admin adds users to group " + cfg.group : "this daemon accepts root only (its config names no group)");
        continue;
      }
      if (clients.size() >= size_t(cfg.max_clients)) {
        refuse("too many clients (" + std::to_string(cfg.max_clients) + ")", "try again later; the admin sets max_clients");
        continue;
      }
      log_line(who(&c) + " op=connect result=ok");
      clients.emplace(c.id, std::move(c));
    }
  }

  void on_readable(Client& c) {
    char buf[8192];
    const ssize_t n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) {
      c.dead = true;
      return;
    }
    if (n < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) c.dead = true;
      return;
    }
    c.in.append(buf, size_t(n));
    size_t start = 0;
    while (!c.closing && !c.dead) {
      const size_t nl = c.in.find('\n', start);
      if (nl == std::string::npos) break;
      size_t len = nl - start;
      if (len > kClockdMaxFrame) {
        oversized(c);
        return;
      }
      if (len > 0 && c.in[start + len - 1] == '\r') --len;
      std::string frame = c.in.substr(start, len);
      start = nl + 1;
      if (frame.find_first_not_of(" \t") == std::string::npos) continue;  // blank lines are ignored
      json r;
      try {
        r = handle(c, frame);
      } catch (const std::exception& e) {
        r = err_reply(std::string("internal error: ") + e.what());
      }
      reply(c, r);
    }
    c.in.erase(0, start);
    if (!c.closing && c.in.size() > kClockdMaxFrame) oversized(c);
  }

  void oversized(Client& c) {
    log_line(who(&c) + " op=frame result=denied " + log_quote("frame over " + std::to_string(kClockdMaxFrame) + " bytes; closing"));
    c.in.clear();
    c.closing = true;
    reply(c, err_reply("frame longer than " + std::to_string(kClockdMaxFrame) + " bytes; closing the connection",
                       "one JSON request per line, each at most " + std::to_string(kClockdMaxFrame) + " bytes"));
  }

  void close_client(Client& c) {
    drop_leases(c, "disconnect");
    log_line(who(&c) + " op=close result=ok");
    ::close(c.fd);
    c.fd = -1;
  }

  // ---- requests ------------------------------------------------------------------------------------
  Result<int> gpu_arg(const json& req) const {
    if (!req.contains("gpu")) return make_error("", "the request needs \"gpu\"", "e.g. {\"op\":\"acquire\",\"gpu\":0}");
    const json& v = req.at("gpu");
    const int n = int(gpus.size());
    if (!v.is_number_integer()) return make_error("", "\"gpu\" must be an integer", "the GPU's position in the daemon's config, 0.." + std::to_string(n - 1));
    const bool in_range = v.is_number_unsigned() ? v.get<uint64_t>() < uint64_t(n) : (v.get<int64_t>() >= 0 && v.get<int64_t>() < n);
    if (!in_range)
      return make_error("", "no gpu " + v.dump() + ": this daemon serves gpus 0.." + std::to_string(n - 1), "{\"op\":\"status\"} lists them");
    return int(v.get<int64_t>());
  }

  std::string holder_text(int g) const {
    const Gpu& gpu = gpus[size_t(g)];
    auto it = clients.find(gpu.holder);
    if (it == clients.end()) return "another client";
    return "pid " + std::to_string(it->second.pid) + " (client " + it->second.name + ", uid " + std::to_string(it->second.uid) + ")";
  }

  // OK when `c` holds g's lease; else the reason as an Error.
  Status need_lease(const Client& c, int g) const {
    const Gpu& gpu = gpus[size_t(g)];
    if (gpu.holder == c.id) return {};
    const std::string gs = "gpu " + std::to_string(g);
    if (gpu.holder != 0)
      return make_error("", "busy: " + gs + " is held by " + holder_text(g), "one lease per GPU: only its holder may change its clock");
    if (c.expired.count(g))
      return make_error("", "the lease on " + gs + " expired (not renewed within " + std::to_string(cfg.lease_ms) + " ms); its clock was reset",
                        "acquire it again, and send {\"op\":\"renew\"} at least every " + std::to_string(cfg.lease_ms / 3) + " ms");
    return make_error("", gs + " is not leased by this connection", "send {\"op\":\"acquire\",\"gpu\":" + std::to_string(g) + "} first");
  }

  json gpu_json(int g) const {
    const Gpu& gpu = gpus[size_t(g)];
    json j = {{"gpu", g},
              {"device", cfg.gpus[size_t(g)].device},
              {"model", devs[size_t(g)]->model_name()},
              {"min_mhz", cfg.gpus[size_t(g)].min_mhz},
              {"max_mhz", cfg.gpus[size_t(g)].max_mhz},
              {"clock_mhz", gpu.locked_mhz > 0 ? json(gpu.locked_mhz) : json(nullptr)},
              {"reset_pending", gpu.reset_pending},
              {"reset_failures", gpu.reset_failures}};
    auto it = clients.find(gpu.holder);
    if (gpu.holder != 0 && it != clients.end()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(gpu.expires - Clock::now()).count();
      j["holder"] = {{"pid", it->second.pid}, {"uid", it->second.uid}, {"client", it->second.name}, {"expires_in_ms", std::max<int64_t>(0, left)}};
    } else {
      j["holder"] = nullptr;
    }
    return j;
  }

  json handle(Client& c, const std::string& frame) {
    json req = json::parse(frame, nullptr, /*allow_exceptions=*/false);
    if (req.is_discarded())
      return err_reply("not JSON", "one JSON object per line, e.g. {\"op\":\"status\"}");
    if (!req.is_object()) return err_reply("a request is a JSON object", "e.g. {\"op\":\"status\"}");
    if (!req.contains("op") || !req.at("op").is_string())
      return err_reply("the request needs \"op\" (a string)", std::string("ops: ") + kOps);
    const std::string op = req.at("op").get<std::string>();
    auto fail = [](const Error& e) { return err_reply(e.what, e.note); };

    if (op == "hello") {
      if (req.contains("client")) {
        if (!req.at("client").is_string()) return err_reply("\"client\" must be a string");
        c.name = sanitize(req.at("client").get<std::string>(), 64);
      }
      return {{"ok", true}, {"server", "emo clockd"}, {"protocol", 1}, {"lease_ms", cfg.lease_ms},
              {"gpus", gpus.size()}, {"max_frame", kClockdMaxFrame}};
    }
    if (op == "status") {
      json list = json::array();
      for (size_t g = 0; g < gpus.size(); ++g) list.push_back(gpu_json(int(g)));
      return {{"ok", true}, {"lease_ms", cfg.lease_ms}, {"clients", clients.size()}, {"reset_failures", failures.load()},
              {"gpus", list}};
    }
    if (op == "renew") {
      json held = json::array();
      for (size_t g = 0; g < gpus.size(); ++g) {
        if (gpus[g].holder != c.id) continue;
        gpus[g].expires = Clock::now() + std::chrono::milliseconds(cfg.lease_ms);
        held.push_back(g);
      }
      if (!c.expired.empty()) {
        std::string which;
        for (int g : c.expired) which += (which.empty() ? "" : ", ") + std::to_string(g);
        return err_reply("the lease on gpu " + which + " expired (not renewed within " + std::to_string(cfg.lease_ms) + " ms); its clock was reset",
                         "acquire it again; this connection's other leases were renewed");
      }
      if (held.empty()) return err_reply("this connection holds no lease", "send {\"op\":\"acquire\",\"gpu\":G} first");
      return {{"ok", true}, {"gpus", held}, {"lease_ms", cfg.lease_ms}};
    }
    if (op != "acquire" && op != "lock" && op != "reset" && op != "release")
      return err_reply("unknown op '" + sanitize(op, 40) + "'", std::string("ops: ") + kOps);

    auto g_or = gpu_arg(req);
    if (!g_or) return fail(g_or.error());
    const int g = *g_or;
    Gpu& gpu = gpus[size_t(g)];

    if (op == "acquire") {
      if (gpu.holder != 0 && gpu.holder != c.id) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(gpu.expires - Clock::now()).count();
        const std::string why = "busy: gpu " + std::to_string(g) + " is held by " + holder_text(g);
        log_op(&c, g, "acquire", 0, "denied " + log_quote(why));
        return err_reply(why, "one lease per GPU: wait until it releases, or its lease ends (in " +
                                  std::to_string(std::max<int64_t>(0, left)) + " ms unless renewed)");
      }
      const bool again = gpu.holder == c.id;
      gpu.holder = c.id;
      gpu.expires = Clock::now() + std::chrono::milliseconds(cfg.lease_ms);
      c.expired.erase(g);
      if (!again) log_op(&c, g, "acquire", 0, "ok");
      return {{"ok", true}, {"gpu", g}, {"device", cfg.gpus[size_t(g)].device}, {"lease_ms", cfg.lease_ms},
              {"min_mhz", cfg.gpus[size_t(g)].min_mhz}, {"max_mhz", cfg.gpus[size_t(g)].max_mhz},
              {"clocks", allowed[size_t(g)]}};
    }

    // Releasing a lease that expired: the daemon reset the clock when it expired (and said so if it could not).
    if (op == "release" && gpu.holder != c.id && c.expired.count(g)) {
      c.expired.erase(g);
      if (gpu.reset_pending && gpu.holder == 0)
        return err_reply("the lease on gpu " + std::to_string(g) + " had expired and its clock could not be reset then",
                         "the daemon keeps retrying; its log has each try");
      return {{"ok", true}, {"gpu", g}, {"expired", true}};
    }
    if (Status st = need_lease(c, g); !st.ok()) {
      log_op(&c, g, op, 0, "denied " + log_quote(st.error().what));
      return fail(st.error());
    }

    if (op == "lock") {
      if (!req.contains("mhz")) return err_reply("lock needs \"mhz\"", "e.g. {\"op\":\"lock\",\"gpu\":0,\"mhz\":1410}");
      const json& v = req.at("mhz");
      if (!v.is_number_integer()) return err_reply("\"mhz\" must be an integer (MHz)");
      const std::vector<int>& ok_clocks = allowed[size_t(g)];
      const ClockdGpuConfig& gc = cfg.gpus[size_t(g)];
      const bool huge = v.is_number_unsigned() ? v.get<uint64_t>() > 1000000 : (v.get<int64_t>() > 1000000 || v.get<int64_t>() < -1000000);
      const int mhz = huge ? 0 : int(v.get<int64_t>());
      if (huge || mhz < gc.min_mhz || mhz > gc.max_mhz) {
        const std::string why = v.dump() + " MHz is outside the admin's range " + std::to_string(gc.min_mhz) + ".." +
                                std::to_string(gc.max_mhz) + " MHz for gpu " + std::to_string(g);
        log_op(&c, g, "lock", mhz, "denied " + log_quote(why));
        return err_reply(why, "allowed: " + range_text(ok_clocks) + "; the acquire reply lists them");
      }
      if (!std::binary_search(ok_clocks.begin(), ok_clocks.end(), mhz)) {
        const std::string why = std::to_string(mhz) + " MHz is not a clock " + gc.device + " supports";
        log_op(&c, g, "lock", mhz, "denied " + log_quote(why));
        return err_reply(why, "nearest allowed: " + nearest_text(ok_clocks, mhz));
      }
      Status st = devs[size_t(g)]->lock_sm_clock(mhz);
      if (!st.ok()) {
        log_op(&c, g, "lock", mhz, "error " + log_quote(st.error().message()));
        // A failed lock may still have changed something: undo it (a failed reset is counted).
        Status rs = reset_gpu(g, &c, "reset-after-failed-lock");
        return err_reply("lock failed: " + st.error().message() + (rs.ok() ? "" : "; then " + rs.error().message()), st.error().note);
      }
      gpu.locked_mhz = mhz;
      log_op(&c, g, "lock", mhz, "ok");
      return {{"ok", true}, {"gpu", g}, {"mhz", mhz}};
    }
    if (op == "reset") {
      Status st = reset_gpu(g, &c, "reset");
      if (!st.ok()) return err_reply(st.error().message(), st.error().note);
      return {{"ok", true}, {"gpu", g}};
    }
    // release
    Status st;
    if (gpu.locked_mhz != 0 || gpu.reset_pending) st = reset_gpu(g, &c, "release");
    else log_op(&c, g, "release", 0, "ok");
    gpu.holder = 0;
    if (!st.ok()) return err_reply(st.error().message() + " (the lease was released)", st.error().note);
    return {{"ok", true}, {"gpu", g}};
  }

  // ---- the loop ------------------------------------------------------------------------------------
  void expire_leases() {
    const auto now = Clock::now();
    for (size_t g = 0; g < gpus.size(); ++g) {
      Gpu& gpu = gpus[g];
      if (gpu.holder == 0 || now < gpu.expires) continue;
      auto it = clients.find(gpu.holder);
      Client* c = it == clients.end() ? nullptr : &it->second;
      if (gpu.locked_mhz != 0 || gpu.reset_pending) (void)reset_gpu(int(g), c, "expire");
      else log_op(c, int(g), "expire", 0, "ok");
      gpu.holder = 0;
      if (c) c->expired.insert(int(g));
    }
    // GPUs whose reset failed and that nobody holds: try again now and then (not counted again).
    for (size_t g = 0; g < gpus.size(); ++g) {
      Gpu& gpu = gpus[g];
      if (gpu.reset_pending && gpu.holder == 0 && now >= gpu.next_retry) (void)reset_gpu(int(g), nullptr, "retry-reset", false);
    }
  }

  int poll_timeout_ms() const {
    auto next = Clock::now() + std::chrono::milliseconds(1000);
    for (const Gpu& gpu : gpus) {
      if (gpu.holder != 0) next = std::min(next, gpu.expires);
      if (gpu.reset_pending && gpu.holder == 0) next = std::min(next, gpu.next_retry);
    }
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(next - Clock::now()).count();
    return us <= 0 ? 0 : int((us + 999) / 1000);
  }

  Status serve() {
    std::vector<pollfd> fds;
    std::vector<int> ids;
    while (true) {
      fds.clear();
      ids.clear();
      fds.push_back({stop_r, POLLIN, 0});
      fds.push_back({listen_fd, POLLIN, 0});
      for (auto& [id, c] : clients) {
        short ev = 0;
        if (!c.closing) ev = short(ev | POLLIN);
        if (!c.out.empty()) ev = short(ev | POLLOUT);
        fds.push_back({c.fd, ev, 0});
        ids.push_back(id);
      }
      const int n = ::poll(fds.data(), nfds_t(fds.size()), poll_timeout_ms());
      if (n < 0 && errno != EINTR) return make_error(cfg.socket, "poll(): " + errno_text(errno));
      if (n > 0) {
        if (fds[0].revents & POLLIN) return {};
        if (fds[1].revents & POLLIN) accept_clients();
        for (size_t i = 0; i < ids.size(); ++i) {
          const short re = fds[i + 2].revents;
          if (re == 0) continue;
          Client& c = clients.at(ids[i]);
          if (re & POLLOUT) flush(c);
          if (!c.dead && (re & (POLLIN | POLLHUP | POLLERR))) {
            if (re & POLLIN) on_readable(c);
            else c.dead = true;  // hung up with nothing left to read
          }
        }
      }
      for (auto it = clients.begin(); it != clients.end();) {
        if (it->second.dead) {
          close_client(it->second);
          it = clients.erase(it);
        } else {
          ++it;
        }
      }
      expire_leases();
    }
  }

  // Resets every GPU, closes every connection and the socket. The returned Error names what failed.
  Status shutdown(const std::string& why) {
    finished = true;
    log_line("pid=- uid=- client=daemon op=stop result=ok " + log_quote(why));
    for (auto& [id, c] : clients) {
      for (Gpu& gpu : gpus)
        if (gpu.holder == id) gpu.holder = 0;
      ::close(c.fd);
    }
    clients.clear();
    std::string failed;
    for (size_t g = 0; g < gpus.size(); ++g) {
      if (!reset_gpu(int(g), nullptr, "stop-reset").ok()) failed += (failed.empty() ? "" : ", ") + std::to_string(g) + " (" + cfg.gpus[g].device + ")";
    }
    remove_socket();
    const int n = failures.load();
    if (n > 0) {
      std::string what = std::to_string(n) + " SM clock reset" + (n > 1 ? "s" : "") + " failed while serving (the log has each)";
      if (!failed.empty()) what += "; gpu " + failed + " may still be locked";
      return make_error(cfg.socket, what, "reset by hand as root: nvidia-smi -i INDEX -rgc");
    }
    return {};
  }
};

ClockdServer::ClockdServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ClockdServer::ClockdServer(ClockdServer&&) noexcept = default;
ClockdServer& ClockdServer::operator=(ClockdServer&&) noexcept = default;
ClockdServer::~ClockdServer() = default;

Result<ClockdServer> ClockdServer::make(ClockdConfig config) {
  const std::string src = config.source.empty() ? std::string("clockd config") : config.source;
  std::vector<std::unique_ptr<backends::Target>> targets;
  std::vector<device::Device*> devs;
  for (size_t g = 0; g < config.gpus.size(); ++g) {
    const std::string where = src + ":gpus[" + std::to_string(g) + "].device";
    auto t = backends::Target::open(config.gpus[g].device);
    if (!t) return make_error(where, t.error().message(), t.error().note);
    auto target = std::make_unique<backends::Target>(std::move(*t));
    auto dev = target->device();
    if (!dev) return make_error(where, dev.error().message(), dev.error().note);
    devs.push_back(*dev);
    targets.push_back(std::move(target));
  }
  auto server = make(std::move(config), std::move(devs));
  if (!server) return server.error();
  server->impl_->targets = std::move(targets);
  return server;
}

Result<ClockdServer> ClockdServer::make(ClockdConfig config, std::vector<device::Device*> devices) {
  const std::string src = config.source.empty() ? std::string("clockd config") : config.source;
  if (config.gpus.empty()) return make_error(src + ":gpus", "no GPUs configured");
  if (devices.size() != config.gpus.size())
    return make_error(src + ":gpus", std::to_string(config.gpus.size()) + " GPUs configured but " + std::to_string(devices.size()) + " devices given");
  auto im = std::make_unique<Impl>();
  im->finished = true;  // nothing to undo until the socket is up
  im->cfg = std::move(config);
  im->devs = std::move(devices);
  im->gpus.resize(im->devs.size());
  if (!im->cfg.group.empty()) {
    auto gid = resolve_group(im->cfg.group, src);
    if (!gid) return gid.error();
    im->gid = *gid;
    im->has_group = true;
  }
  if (!im->cfg.log.empty()) {
    im->log = std::fopen(im->cfg.log.c_str(), "ae");
    if (!im->log) return make_error(src + ":log " + im->cfg.log, "cannot open for appending: " + errno_text(errno));
    im->own_log = true;
  }
  for (size_t g = 0; g < im->devs.size(); ++g) {
    const ClockdGpuConfig& gc = im->cfg.gpus[g];
    const std::string where = src + ":gpus[" + std::to_string(g) + "]";
    if (im->devs[g] == nullptr) return make_error(where, "no device");
    auto clocks = im->devs[g]->supported_sm_clocks();
    if (!clocks) return make_error(where + " " + gc.device, clocks.error().message(), clocks.error().note);
    std::vector<int> ok;
    for (int mhz : *clocks)
      if (mhz >= gc.min_mhz && mhz <= gc.max_mhz) ok.push_back(mhz);
    std::sort(ok.begin(), ok.end());
    ok.erase(std::unique(ok.begin(), ok.end()), ok.end());
    if (ok.empty())
      return make_error(where, "no clock " + gc.device + " supports lies in " + std::to_string(gc.min_mhz) + ".." + std::to_string(gc.max_mhz) + " MHz",
                        "it supports " + range_text(*clocks));
    im->allowed.push_back(std::move(ok));
  }
  int p[2];
  if (::pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0) return make_error(src, "pipe2(): " + errno_text(errno));
  im->stop_r = p[0];
  im->stop_w = p[1];
  im->log_line("pid=- uid=- client=daemon op=start socket=" + im->cfg.socket + " lease_ms=" + std::to_string(im->cfg.lease_ms) +
               " gpus=" + std::to_string(im->gpus.size()) + " result=ok");
  // The socket first: a path that is not a socket, or another daemon listening there, must stop this
  // one before it touches a clock (the other daemon's clients hold locks).
  Status st = im->bind_socket();
  if (!st.ok()) {
    if (im->listen_fd >= 0) ::close(im->listen_fd);
    im->listen_fd = -1;
    return st.error();
  }
  // A previous daemon may have died with clocks locked: every GPU starts from the default policy.
  for (size_t g = 0; g < im->gpus.size(); ++g) {
    Status rs = im->reset_gpu(int(g), nullptr, "start-reset");
    if (!rs.ok()) {
      im->remove_socket();
      return make_error(src + ":gpus[" + std::to_string(g) + "] " + im->cfg.gpus[g].device,
                        "could not reset the SM clock at start: " + rs.error().what, rs.error().note);
    }
  }
  if (::listen(im->listen_fd, 64) != 0) {
    const int e = errno;
    im->remove_socket();
    return make_error(im->cfg.socket, "listen(): " + errno_text(e));
  }
  im->finished = false;
  return ClockdServer(std::move(im));
}

Status ClockdServer::run_until_stopped() {
  if (!impl_) return make_error("clockd", "no server (moved from)");
  if (impl_->finished) return impl_->final_status;
  Status served = impl_->serve();
  Status down = impl_->shutdown(served.ok() ? "stopped" : served.error().message());
  impl_->final_status = !served.ok() ? served : down;
  return impl_->final_status;
}

void ClockdServer::stop() {
  if (!impl_ || impl_->stop_w < 0) return;
  const char x = 'x';
  (void)!::write(impl_->stop_w, &x, 1);
}

Result<std::string> check_clockd_config(const ClockdConfig& config) {
  const std::string src = config.source.empty() ? std::string("clockd config") : config.source;
  std::string out = "config " + src + "\n";
  if (config.group.empty()) {
    out += "  clients:   root and uid " + std::to_string(::geteuid()) + " only (no \"group\"; socket mode 0600)\n";
  } else {
    auto gid = resolve_group(config.group, src);
    if (!gid) return gid.error();
    out += "  clients:   root, uid " + std::to_string(::geteuid()) + " and members of group " + config.group + " (gid " +
           std::to_string(*gid) + "; socket mode 0660)\n";
  }
  std::string state;
  struct stat st {};
  if (::lstat(config.socket.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      return make_error(src + ":socket " + config.socket, "exists and is not a socket; emo clockd removes only a stale socket there",
                        "remove it yourself if nothing needs it, or set another \"socket\" in the config");
    sockaddr_un addr {};
    set_addr(addr, config.socket);
    const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    const int rc = probe < 0 ? -1 : ::connect(probe, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
    const int e = errno;
    if (probe >= 0) ::close(probe);
    state = rc == 0 || e == EAGAIN ? "a daemon is listening there now" : "a stale socket (the daemon replaces it)";
  } else {
    const std::string dir = config.socket.substr(0, config.socket.rfind('/'));
    struct stat ds {};
    state = dir.empty() || (::stat(dir.c_str(), &ds) == 0 && S_ISDIR(ds.st_mode))
                ? "free"
                : "free, but its folder " + dir + " does not exist (systemd's RuntimeDirectory=emo creates /run/emo)";
  }
  out += "  socket:    " + config.socket + " (" + state + ")\n";
  out += "  lease:     " + std::to_string(config.lease_ms) + " ms (a client that does not renew within it has its GPU reset)\n";
  out += "  log:       " + (config.log.empty() ? std::string("stderr") : config.log) + "\n";
  out += "  limit:     at most " + std::to_string(config.max_clients) + " connections\n";
  if (config.gpus.empty()) return make_error(src + ":gpus", "no GPUs configured");
  for (size_t g = 0; g < config.gpus.size(); ++g) {
    const ClockdGpuConfig& gc = config.gpus[g];
    const std::string where = src + ":gpus[" + std::to_string(g) + "].device";
    auto t = backends::Target::open(gc.device);
    if (!t) return make_error(where, t.error().message(), t.error().note);
    auto dev = t->device();
    if (!dev) return make_error(where, dev.error().message(), dev.error().note);
    auto clocks = (*dev)->supported_sm_clocks();
    if (!clocks) return make_error(where, clocks.error().message(), clocks.error().note);
    std::vector<int> ok;
    for (int mhz : *clocks)
      if (mhz >= gc.min_mhz && mhz <= gc.max_mhz) ok.push_back(mhz);
    if (ok.empty())
      return make_error(src + ":gpus[" + std::to_string(g) + "]",
                        "no clock " + gc.device + " supports lies in " + std::to_string(gc.min_mhz) + ".." + std::to_string(gc.max_mhz) + " MHz",
                        "it supports " + range_text(*clocks));
    out += "  gpu " + std::to_string(g) + ":     " + gc.device + " (" + (*dev)->model_name() + "): range " + std::to_string(gc.min_mhz) + ".." +
           std::to_string(gc.max_mhz) + " MHz allows " + range_text(ok) + " of " + std::to_string(clocks->size()) + " supported\n";
  }
  return out;
}

int ClockdServer::reset_failures() const { return impl_ ? impl_->failures.load() : 0; }
const ClockdConfig& ClockdServer::config() const { return impl_->cfg; }
std::vector<device::Device*> ClockdServer::devices() const { return impl_->devs; }
const std::vector<std::vector<int>>& ClockdServer::allowed_clocks() const { return impl_->allowed; }

}  // namespace emo::runtime
