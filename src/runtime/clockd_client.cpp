// ClockdClient: one GPU steered through `emo clockd`. One connection per client; every request waits
// for its reply at most `timeout_ms`; a background thread renews the lease every lease_ms / 3.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

#include "emo/runtime/clockd.h"

namespace emo::runtime {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr size_t kMaxReply = 1 << 20;
std::atomic<int> g_client_reset_failures{0};

std::string str_field(const json& r, const char* key, const std::string& fallback) {
  return r.contains(key) && r[key].is_string() ? r[key].get<std::string>() : fallback;
}

int ms_left(Clock::time_point deadline) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return ms <= 0 ? 0 : int(ms);
}

Result<int> connect_socket(const std::string& path, int timeout_ms) {
  const std::string where = "clockd:" + path;
  sockaddr_un addr {};
  if (path.empty() || path.size() >= sizeof addr.sun_path) return make_error(where, "not a usable Unix socket path (1 to 107 bytes)");
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return make_error(where, std::string("socket(): ") + std::strerror(errno));
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) return fd;
    const int e = errno;
    ::close(fd);
    if (e == EAGAIN && ms_left(deadline) > 0) {  // the daemon's backlog is full: it is busy, try again
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    switch (e) {
      case ENOENT:
        return make_error(where, "no such socket", "is emo clockd running? (systemctl status emo-clockd)");
      case ECONNREFUSED:
        return make_error(where, "connection refused: nothing listens there (the daemon is not running)",
                          "start it (systemctl start emo-clockd)");
      case EACCES:
        return make_error(where, "permission denied", "the admin adds users who may steer clocks to the daemon's group");
      case EAGAIN:
        return make_error(where, "the daemon accepted no connection within " + std::to_string(timeout_ms) + " ms");
      default:
        return make_error(where, std::string("cannot connect: ") + std::strerror(e));
    }
  }
}

// Sends `line` and reads one reply line, both within `timeout_ms`. `pending` keeps bytes read past it.
Result<std::string> exchange(int fd, const std::string& where, const std::string& line, std::string& pending, int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  size_t sent = 0;
  while (sent < line.size()) {
    const ssize_t n = ::send(fd, line.data() + sent, line.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += size_t(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, ms_left(deadline)) <= 0 && ms_left(deadline) == 0)
        return make_error(where, "the daemon took no request within " + std::to_string(timeout_ms) + " ms");
      continue;
    }
    return make_error(where, std::string("the connection to the daemon broke: ") + std::strerror(errno),
                      "was emo clockd stopped? (systemctl status emo-clockd)");
  }
  while (true) {
    const size_t nl = pending.find('\n');
    if (nl != std::string::npos) {
      std::string reply = pending.substr(0, nl);
      pending.erase(0, nl + 1);
      return reply;
    }
    if (pending.size() > kMaxReply) return make_error(where, "the daemon's reply is longer than 1 MiB");
    pollfd p{fd, POLLIN, 0};
    const int left = ms_left(deadline);
    const int pr = left > 0 ? ::poll(&p, 1, left) : 0;
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) return make_error(where, "no reply from the daemon within " + std::to_string(timeout_ms) + " ms");
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      pending.append(buf, size_t(n));
      continue;
    }
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    return make_error(where, n == 0 ? "the daemon closed the connection" : std::string("reading the reply: ") + std::strerror(errno),
                      "was emo clockd stopped or restarted? (systemctl status emo-clockd; its log says why)");
  }
}

}  // namespace

Result<std::string> clockd_status(const std::string& socket_path, int timeout_ms) {
  auto fd = connect_socket(socket_path, timeout_ms);
  if (!fd) return fd.error();
  const std::string where = "clockd:" + socket_path;
  std::string pending;
  auto reply = exchange(*fd, where, "{\"op\":\"status\"}\n", pending, timeout_ms);
  ::close(*fd);
  if (!reply) return reply.error();
  json r = json::parse(*reply, nullptr, false);
  if (!r.is_object() || !r.contains("ok") || !r["ok"].is_boolean()) return make_error(where, "not a clockd reply: " + reply->substr(0, 200));
  if (!r["ok"].get<bool>())
    return make_error(where, str_field(r, "error", "the daemon refused"), str_field(r, "note", ""));
  return *reply;
}

int clockd_client_reset_failures() { return g_client_reset_failures.load(); }

ClockdClient::ClockdClient(int fd, std::string socket_path, int gpu, Options options)
    : fd_(fd), socket_(std::move(socket_path)), gpu_(gpu), options_(std::move(options)) {}

Result<std::unique_ptr<ClockdClient>> ClockdClient::connect(const std::string& socket_path, int gpu, Options options) {
  if (options.timeout_ms <= 0) options.timeout_ms = 5000;
  auto fd = connect_socket(socket_path, options.timeout_ms);
  if (!fd) return fd.error();
  std::unique_ptr<ClockdClient> c(new ClockdClient(*fd, socket_path, gpu, options));
  c->released_ = true;  // nothing to release until the lease is ours
  std::string reply;
  json hello = {{"op", "hello"}, {"client", options.client}};
  if (Status st = c->call(hello.dump(-1, ' ', false, json::error_handler_t::replace), &reply); !st.ok()) return st.error();
  json acquire = {{"op", "acquire"}, {"gpu", gpu}};
  if (Status st = c->call(acquire.dump(), &reply); !st.ok()) return st.error();
  json r = json::parse(reply, nullptr, false);
  c->lease_ms_ = r.is_object() && r.contains("lease_ms") && r["lease_ms"].is_number_integer() ? r["lease_ms"].get<int>() : 0;
  if (c->lease_ms_ <= 0) return make_error(c->describe(), "the daemon's acquire reply has no lease_ms");
  c->released_ = false;
  if (c->options_.renew) c->renewer_ = std::thread([raw = c.get()] { raw->renew_loop(); });
  return c;
}

ClockdClient::~ClockdClient() {
  if (!released_) {
    Status st = release();
    if (!st.ok()) {
      g_client_reset_failures.fetch_add(1);
      std::fprintf(stderr, "error: %s\nnote: the daemon resets the GPU when this connection closes; its log says whether it could\n",
                   st.error().message().c_str());
    }
  }
  {
    std::lock_guard<std::mutex> lk(state_mu_);
    stopping_ = true;
  }
  state_cv_.notify_all();
  if (renewer_.joinable()) renewer_.join();
  if (fd_ >= 0) ::close(fd_);
}

std::string ClockdClient::describe() const { return "clockd:" + socket_ + "#" + std::to_string(gpu_); }

Result<std::string> ClockdClient::request(const std::string& line) {
  std::lock_guard<std::mutex> lk(io_mu_);
  if (fd_ < 0) return make_error(describe(), "the connection to the daemon is closed");
  auto r = exchange(fd_, describe(), line.empty() || line.back() != '\n' ? line + "\n" : line, pending_in_, options_.timeout_ms);
  if (!r) {
    // A late reply would answer the next request: this connection is done (the daemon resets on close).
    ::close(fd_);
    fd_ = -1;
  }
  return r;
}

Status ClockdClient::call(const std::string& line, std::string* reply_out) {
  auto reply = request(line);
  if (!reply) return reply.error();
  json r = json::parse(*reply, nullptr, false);
  if (!r.is_object() || !r.contains("ok") || !r["ok"].is_boolean())
    return make_error(describe(), "the daemon's reply is not a clockd reply: " + reply->substr(0, 200));
  if (!r["ok"].get<bool>()) {
    return make_error(describe(), str_field(r, "error", "the daemon refused"), str_field(r, "note", ""));
  }
  if (reply_out) *reply_out = std::move(*reply);
  return {};
}

Status ClockdClient::lock_sm_clock(int mhz) {
  {
    std::lock_guard<std::mutex> lk(state_mu_);
    if (lost_set_) return lost_;
  }
  if (released_) return make_error(describe(), "the lease was released");
  return call(json({{"op", "lock"}, {"gpu", gpu_}, {"mhz", mhz}}).dump(), nullptr);
}

Status ClockdClient::reset_sm_clock() {
  if (released_) return make_error(describe(), "the lease was released");
  return call(json({{"op", "reset"}, {"gpu", gpu_}}).dump(), nullptr);
}

Status ClockdClient::renew() {
  if (released_) return make_error(describe(), "the lease was released");
  return call(R"({"op":"renew"})", nullptr);
}

Result<std::string> ClockdClient::status() {
  std::string reply;
  if (Status st = call(R"({"op":"status"})", &reply); !st.ok()) return st.error();
  return reply;
}

Status ClockdClient::release() {
  {
    std::lock_guard<std::mutex> lk(state_mu_);
    stopping_ = true;
  }
  state_cv_.notify_all();
  if (renewer_.joinable() && renewer_.get_id() != std::this_thread::get_id()) renewer_.join();
  if (released_) return {};
  released_ = true;
  return call(json({{"op", "release"}, {"gpu", gpu_}}).dump(), nullptr);
}

void ClockdClient::renew_loop() {
  const auto period = std::chrono::milliseconds(std::max(1, lease_ms_ / 3));
  std::unique_lock<std::mutex> lk(state_mu_);
  while (!stopping_) {
    if (state_cv_.wait_for(lk, period, [this] { return stopping_; })) break;
    lk.unlock();
    Status st = call(R"({"op":"renew"})", nullptr);
    lk.lock();
    if (!st.ok()) {
      lost_ = make_error(describe(), "the lease was lost: " + st.error().what, st.error().note);
      lost_set_ = true;
      return;
    }
  }
}

}  // namespace emo::runtime
