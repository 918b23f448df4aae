// `emo clockd` against hostile clients: the daemon runs in-process on a thread over a temporary socket
// and emulated H100s wrapped in a recording device (which clock is locked now, how many resets, and
// injected reset failures). Clients are ClockdClient, raw sockets (garbage, oversized frames, replies
// never read) and a forked child killed with SIGKILL while it holds a lock.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "emo/emulator/emulator.h"
#include "emo/runtime/clockd.h"

namespace emo::runtime {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// An emulated GPU that says which clock is locked (0: the default policy) and can fail resets.
class RecordingDevice final : public device::Device {
 public:
  explicit RecordingDevice(uint64_t seed) {
    auto d = emulator::open_emulated_device("h100", seed);
    if (!d) throw std::runtime_error(d.error().message());
    inner_ = std::move(*d);
  }
  std::string spec() const override { return inner_->spec(); }
  std::string model_name() const override { return inner_->model_name(); }
  const device::DeviceProfile& profile() const override { return inner_->profile(); }
  Result<std::vector<int>> supported_sm_clocks() override { return inner_->supported_sm_clocks(); }
  Status lock_sm_clock(int mhz) override {
    Status st = inner_->lock_sm_clock(mhz);
    if (st.ok()) locked = mhz;
    locks.fetch_add(1);
    return st;
  }
  Status reset_sm_clock() override {
    resets.fetch_add(1);
    if (fail_resets.load() > 0) {
      fail_resets.fetch_sub(1);
      return make_error(spec(), "injected reset failure");
    }
    Status st = inner_->reset_sm_clock();
    if (st.ok()) locked = 0;
    return st;
  }
  Result<double> energy_j() override { return inner_->energy_j(); }
  Result<device::BenchRun> run_benchmark(const device::BenchSpec& s) override { return inner_->run_benchmark(s); }

  std::atomic<int> locked{0};
  std::atomic<int> locks{0};
  std::atomic<int> resets{0};
  std::atomic<int> fail_resets{0};

 private:
  std::unique_ptr<device::Device> inner_;
};

bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto until = Clock::now() + timeout;
  while (Clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return pred();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

sockaddr_un addr_of(const std::string& path) {
  sockaddr_un a {};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.c_str(), path.size());
  return a;
}

// A raw client: bytes out, reply lines in, every wait bounded.
class Raw {
 public:
  explicit Raw(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const sockaddr_un a = addr_of(path);
    if (::connect(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~Raw() { close(); }
  bool ok() const { return fd_ >= 0; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  bool send(const std::string& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += size_t(n);
    }
    return true;
  }
  // The next reply line; nullopt on EOF or timeout.
  std::optional<std::string> line(int timeout_ms = 3000) {
    const auto until = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (true) {
      const size_t nl = buf_.find('\n');
      if (nl != std::string::npos) {
        std::string l = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return l;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
      if (left <= 0) return std::nullopt;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, int(left)) <= 0) return std::nullopt;
      char b[4096];
      const ssize_t n = ::recv(fd_, b, sizeof b, 0);
      if (n <= 0) {
        eof_ = true;
        return std::nullopt;
      }
      buf_.append(b, size_t(n));
    }
  }
  json ask(const std::string& request) {
    if (!send(request + "\n")) return json();
    auto l = line();
    if (!l) return json();
    return json::parse(*l, nullptr, false);
  }
  // True once the daemon closed the connection (replies before it are skipped).
  bool closed_by_peer(int timeout_ms = 3000) {
    const auto until = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!eof_ && Clock::now() < until) {
      buf_.clear();
      (void)line(50);
    }
    return eof_;
  }

 private:
  int fd_ = -1;
  std::string buf_;
  bool eof_ = false;
};

std::string err_of(const json& j) { return j.is_object() && j.contains("error") ? j["error"].get<std::string>() : j.dump(); }
bool ok_of(const json& j) { return j.is_object() && j.value("ok", false); }

class ClockdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/emo-clockd-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    cfg_.socket = dir_ + "/clockd.sock";
    cfg_.log = dir_ + "/clockd.log";
    cfg_.lease_ms = 5000;
    cfg_.gpus = {{"emulated:h100", 1005, 1980}, {"emulated:h100@2", 1005, 1980}};
  }
  void TearDown() override {
    (void)stop();
    std::filesystem::remove_all(dir_);
  }
  void start() {
    auto s = ClockdServer::make(cfg_, {&dev0_, &dev1_});
    ASSERT_TRUE(s.ok()) << s.error().message();
    server_.emplace(std::move(*s));
    thread_ = std::thread([this] { result_ = server_->run_until_stopped(); });
  }
  Status stop() {
    if (server_) server_->stop();
    if (thread_.joinable()) thread_.join();
    return result_;
  }
  std::unique_ptr<ClockdClient> client(int gpu, bool renew = true) {
    ClockdClient::Options o;
    o.client = "test";
    o.renew = renew;
    auto c = ClockdClient::connect(cfg_.socket, gpu, o);
    EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().message());
    return c.ok() ? std::move(*c) : nullptr;
  }
  json status() {
    auto s = clockd_status(cfg_.socket);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message());
    return s.ok() ? json::parse(*s) : json();
  }

  std::string dir_;
  ClockdConfig cfg_;
  RecordingDevice dev0_{1}, dev1_{2};
  std::optional<ClockdServer> server_;
  std::thread thread_;
  Status result_;
};

// ---- the config -------------------------------------------------------------------------------------

TEST(ClockdConfig, ReadsEveryKey) {
  auto c = parse_clockd_config(R"({"socket": "/run/emo/x.sock", "group": "emo", "lease_ms": 2000, "log": "/var/log/c.log",
      "max_clients": 8, "gpus": [{"device": "nvml:0", "min_mhz": 1005, "max_mhz": 1980}, {"device": "nvml:1", "min_mhz": 900, "max_mhz": 1500}]})",
                               "c.json");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->socket, "/run/emo/x.sock");
  EXPECT_EQ(c->group, "emo");
  EXPECT_EQ(c->lease_ms, 2000);
  EXPECT_EQ(c->log, "/var/log/c.log");
  EXPECT_EQ(c->max_clients, 8);
  ASSERT_EQ(c->gpus.size(), 2u);
  EXPECT_EQ(c->gpus[1].device, "nvml:1");
  EXPECT_EQ(c->gpus[1].min_mhz, 900);
  auto d = parse_clockd_config(R"({"gpus": [{"device": "nvml:0", "min_mhz": 1005, "max_mhz": 1980}]})", "d.json");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->socket, kClockdDefaultSocket);
  EXPECT_EQ(d->lease_ms, 5000);
  EXPECT_TRUE(d->group.empty());
}

TEST(ClockdConfig, ErrorsNameFileAndKey) {
  struct Case {
    const char* text;
    const char* where;
    const char* what;
  };
  const Case cases[] = {
      {"not json", "c.json", "not valid JSON"},
      {"[1]", "c.json", "must be a JSON object"},
      {R"({"gpus": []})", "c.json:gpus", "non-empty"},
      {R"({})", "c.json:gpus", "missing"},
      {R"({"sockett": "/x", "gpus": []})", "c.json:sockett", "unknown key"},
      {R"({"socket": "relative.sock", "gpus": [{"device": "nvml:0", "min_mhz": 1, "max_mhz": 2}]})", "c.json:socket", "absolute"},
      {R"({"lease_ms": 10, "gpus": [{"device": "nvml:0", "min_mhz": 1, "max_mhz": 2}]})", "c.json:lease_ms", "between"},
      {R"({"lease_ms": "5000", "gpus": [{"device": "nvml:0", "min_mhz": 1, "max_mhz": 2}]})", "c.json:lease_ms", "integer"},
      {R"({"gpus": [{"device": "nvml:0", "min_mhz": 1500, "max_mhz": 1000}]})", "c.json:gpus[0]", "above max_mhz"},
      {R"({"gpus": [{"device": "nvml:0", "max_mhz": 1000}]})", "c.json:gpus[0].min_mhz", "missing"},
      {R"({"gpus": [{"device": 0, "min_mhz": 1, "max_mhz": 1000}]})", "c.json:gpus[0].device", "string"},
      {R"({"gpus": [{"device": "nvml:0", "min_mhz": 1, "max_mhz": 2, "mhz": 3}]})", "c.json:gpus[0].mhz", "unknown key"},
      {R"({"gpus": [{"device": "nvml:0", "min_mhz": 1, "max_mhz": 2}, {"device": "nvml:0", "min_mhz": 1, "max_mhz": 2}]})",
       "c.json:gpus[1].device", "named twice"},
  };
  for (const Case& c : cases) {
    auto r = parse_clockd_config(c.text, "c.json");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.error().where, c.where) << c.text;
    EXPECT_NE(r.error().what.find(c.what), std::string::npos) << c.text << " -> " << r.error().message();
  }
  auto missing = read_clockd_config("/nonexistent/clockd.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("/nonexistent/clockd.json"), std::string::npos);
}

TEST_F(ClockdTest, RangeWithoutASupportedClockIsRefused) {
  cfg_.gpus[1] = {"emulated:h100@2", 1981, 1990};
  auto s = ClockdServer::make(cfg_, {&dev0_, &dev1_});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("gpus[1]"), std::string::npos) << s.error().message();
  cfg_.group = "no-such-group-emo-test";
  cfg_.gpus[1] = {"emulated:h100@2", 1005, 1980};
  s = ClockdServer::make(cfg_, {&dev0_, &dev1_});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().what.find("no group named"), std::string::npos) << s.error().message();
}

TEST_F(ClockdTest, OpensDevicesFromSpecs) {
  cfg_.gpus = {{"emulated:h100", 1005, 1980}};
  auto s = ClockdServer::make(cfg_);
  ASSERT_TRUE(s.ok()) << s.error().message();
  ASSERT_EQ(s->devices().size(), 1u);
  EXPECT_EQ(s->devices()[0]->spec(), "emulated:h100");
  EXPECT_EQ(s->allowed_clocks()[0].front(), 1005);
  EXPECT_EQ(s->allowed_clocks()[0].back(), 1980);
  auto report = check_clockd_config(cfg_);
  ASSERT_TRUE(report.ok()) << report.error().message();
  EXPECT_NE(report->find("a daemon is listening there now"), std::string::npos) << *report;
  cfg_.gpus = {{"h100", 1005, 1980}};  // a bare profile cannot be locked
  cfg_.socket = dir_ + "/other.sock";
  auto bad = ClockdServer::make(cfg_);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("gpus[0].device"), std::string::npos) << bad.error().message();
}

// ---- leases and resets ------------------------------------------------------------------------------

TEST_F(ClockdTest, StartResetsEveryGpu) {
  ASSERT_TRUE(dev0_.lock_sm_clock(1200).ok());  // a previous daemon died with this locked
  start();
  EXPECT_EQ(dev0_.locked.load(), 0);
  EXPECT_GE(dev1_.resets.load(), 1);
  struct stat st {};
  ASSERT_EQ(::stat(cfg_.socket.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);  // no group: root and the daemon's user only
}

TEST_F(ClockdTest, LockResetReleaseThroughTheClient) {
  start();
  auto c = client(0);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->describe(), "clockd:" + cfg_.socket + "#0");
  EXPECT_EQ(c->lease_ms(), 5000);
  ASSERT_TRUE(c->lock_sm_clock(1410).ok());
  EXPECT_EQ(dev0_.locked.load(), 1410);
  json s = status();
  EXPECT_EQ(s["gpus"][0]["clock_mhz"], 1410);
  EXPECT_EQ(s["gpus"][0]["holder"]["pid"], int(::getpid()));
  EXPECT_TRUE(s["gpus"][1]["holder"].is_null());
  ASSERT_TRUE(c->reset_sm_clock().ok());
  EXPECT_EQ(dev0_.locked.load(), 0);
  ASSERT_TRUE(c->lock_sm_clock(1200).ok());
  ASSERT_TRUE(c->release().ok());
  EXPECT_EQ(dev0_.locked.load(), 0);
  EXPECT_FALSE(c->lock_sm_clock(1410).ok());  // released: nothing to lock with
  EXPECT_TRUE(status()["gpus"][0]["holder"].is_null());
  c.reset();
  // Every change is logged: who, which GPU, what, which clock, the result.
  const std::string log = slurp(cfg_.log);
  const std::string me = "pid=" + std::to_string(::getpid());
  EXPECT_NE(log.find(me + " uid=" + std::to_string(::getuid()) + " client=test gpu=0 device=emulated:h100 op=acquire mhz=- result=ok"),
            std::string::npos) << log;
  EXPECT_NE(log.find("client=test gpu=0 device=emulated:h100 op=lock mhz=1410 result=ok"), std::string::npos) << log;
  EXPECT_NE(log.find("client=test gpu=0 device=emulated:h100 op=reset mhz=- result=ok"), std::string::npos) << log;
  EXPECT_NE(log.find("client=test gpu=0 device=emulated:h100 op=release mhz=- result=ok"), std::string::npos) << log;
  EXPECT_NE(log.find("op=start-reset"), std::string::npos) << log;
}

TEST_F(ClockdTest, DisconnectResets) {
  start();
  Raw r(cfg_.socket);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(ok_of(r.ask(R"({"op":"acquire","gpu":1})")));
  ASSERT_TRUE(ok_of(r.ask(R"({"op":"lock","gpu":1,"mhz":1500})")));
  EXPECT_EQ(dev1_.locked.load(), 1500);
  r.close();
  EXPECT_TRUE(wait_until([&] { return dev1_.locked.load() == 0; }, 2000ms));
  EXPECT_TRUE(wait_until([&] { return status()["gpus"][1]["holder"].is_null(); }, 2000ms));
  EXPECT_NE(slurp(cfg_.log).find("gpu=1 device=emulated:h100@2 op=disconnect mhz=- result=ok"), std::string::npos);
  // The client's destructor releases too (and a dropped client is reset by the daemon either way).
  {
    auto c = client(0);
    ASSERT_TRUE(c);
    ASSERT_TRUE(c->lock_sm_clock(1110).ok());
  }
  EXPECT_EQ(dev0_.locked.load(), 0);
}

TEST_F(ClockdTest, LeaseExpiresWithoutRenewal) {
  cfg_.lease_ms = 200;
  start();
  auto c = client(0, /*renew=*/false);
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->lock_sm_clock(1410).ok());
  const auto t0 = Clock::now();
  EXPECT_TRUE(wait_until([&] { return dev0_.locked.load() == 0; }, 2000ms));
  EXPECT_GE(Clock::now() - t0, 150ms);
  Status again = c->lock_sm_clock(1410);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().what.find("expired"), std::string::npos) << again.error().message();
  EXPECT_FALSE(c->renew().ok());
  EXPECT_EQ(dev0_.locked.load(), 0);
  EXPECT_NE(slurp(cfg_.log).find("op=expire"), std::string::npos);
  // Another client may take it now.
  auto other = client(0);
  ASSERT_TRUE(other);
  EXPECT_TRUE(other->lock_sm_clock(1500).ok());
}

TEST_F(ClockdTest, RenewalKeepsTheLease) {
  cfg_.lease_ms = 500;
  start();
  auto c = client(0);  // renews every ~166 ms
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->lock_sm_clock(1410).ok());
  std::this_thread::sleep_for(1500ms);  // three leases
  EXPECT_EQ(dev0_.locked.load(), 1410);
  EXPECT_TRUE(c->lock_sm_clock(1500).ok());
  EXPECT_EQ(dev0_.locked.load(), 1500);
  EXPECT_EQ(status()["gpus"][0]["holder"]["pid"], int(::getpid()));
}

// ---- hostile clients --------------------------------------------------------------------------------

TEST_F(ClockdTest, GarbageGetsErrorRepliesAndTheConnectionStays) {
  start();
  Raw r(cfg_.socket);
  ASSERT_TRUE(r.ok());
  const std::pair<const char*, const char*> cases[] = {
      {"garbage", "not JSON"},
      {"{\"op\":", "not JSON"},
      {"[1,2,3]", "JSON object"},
      {"42", "JSON object"},
      {"{}", "\"op\""},
      {R"({"op":7})", "\"op\""},
      {R"({"op":"format-disk"})", "unknown op"},
      {"{\"op\":\"\xff\xfe\"}", "not JSON"},  // invalid UTF-8
      {"{\"op\":\"st\\u0000atus\"}", "unknown op"},
      {R"({"op":"acquire"})", "needs \"gpu\""},
      {R"({"op":"acquire","gpu":"0"})", "must be an integer"},
      {R"({"op":"acquire","gpu":-1})", "no gpu -1"},
      {R"({"op":"acquire","gpu":2})", "no gpu 2"},
      {R"({"op":"acquire","gpu":18446744073709551615})", "no gpu"},
      {R"({"op":"acquire","gpu":1.5})", "must be an integer"},
      {R"({"op":"lock","gpu":0,"mhz":1410})", "not leased"},
      {R"({"op":"hello","client":{"a":1}})", "must be a string"},
  };
  for (const auto& [req, want] : cases) {
    json j = r.ask(req);
    ASSERT_TRUE(j.is_object()) << req;
    EXPECT_FALSE(ok_of(j)) << req;
    EXPECT_NE(err_of(j).find(want), std::string::npos) << req << " -> " << j.dump();
  }
  std::string deep(2000, '[');
  deep += std::string(2000, ']');
  EXPECT_FALSE(ok_of(r.ask(deep)));
  ASSERT_TRUE(r.send("\n\r\n   \n"));  // blank lines are skipped, no reply
  EXPECT_TRUE(ok_of(r.ask(R"({"op":"status"})")));
  EXPECT_TRUE(ok_of(r.ask(R"({"op":"hello","client":"evil client \"; rm -rf /"})")));
  EXPECT_EQ(dev0_.locks.load() + dev1_.locks.load(), 0);
  // Several requests in one write: one reply each, in order.
  ASSERT_TRUE(r.send("{\"op\":\"acquire\",\"gpu\":0}\n{\"op\":\"lock\",\"gpu\":0,\"mhz\":1410}\n{\"op\":\"status\"}\n"));
  for (int i = 0; i < 3; ++i) {
    auto l = r.line();
    ASSERT_TRUE(l);
    EXPECT_TRUE(ok_of(json::parse(*l))) << *l;
  }
  EXPECT_EQ(dev0_.locked.load(), 1410);
  // The hello's name reached the log as one token.
  EXPECT_NE(slurp(cfg_.log).find("client=evil_client____rm_-rf_/ gpu=0"), std::string::npos) << slurp(cfg_.log);
}

TEST_F(ClockdTest, OversizedFrameClosesOnlyThatConnection) {
  start();
  Raw holder(cfg_.socket);
  ASSERT_TRUE(ok_of(holder.ask(R"({"op":"acquire","gpu":1})")));
  ASSERT_TRUE(ok_of(holder.ask(R"({"op":"lock","gpu":1,"mhz":1605})")));
  for (const std::string& frame : {std::string(5000, 'a'), std::string(kClockdMaxFrame + 1, 'b') + "\n",
                                   "{\"op\":\"status\",\"pad\":\"" + std::string(8000, ' ') + "\"}\n"}) {
    Raw r(cfg_.socket);
    ASSERT_TRUE(ok_of(r.ask(R"({"op":"acquire","gpu":0})")));
    ASSERT_TRUE(ok_of(r.ask(R"({"op":"lock","gpu":0,"mhz":1410})")));
    ASSERT_TRUE(r.send(frame));
    auto l = r.line();
    ASSERT_TRUE(l);
    EXPECT_NE(err_of(json::parse(*l)).find("longer than 4096 bytes"), std::string::npos) << *l;
    EXPECT_TRUE(r.closed_by_peer());
    // The oversized client's GPU is reset; the other client's lock and the daemon are untouched.
    EXPECT_TRUE(wait_until([&] { return dev0_.locked.load() == 0; }, 2000ms));
    EXPECT_EQ(dev1_.locked.load(), 1605);
    EXPECT_TRUE(ok_of(holder.ask(R"({"op":"renew"})")));
  }
  // A frame of exactly the limit is fine.
  Raw r(cfg_.socket);
  std::string exact = R"({"op":"status","pad":")";
  exact += std::string(kClockdMaxFrame - exact.size() - 2, 'x') + "\"}";
  ASSERT_EQ(exact.size(), kClockdMaxFrame);
  EXPECT_TRUE(ok_of(r.ask(exact)));
}

TEST_F(ClockdTest, OutOfRangeAndUnsupportedClocksAreRejected) {
  cfg_.gpus[0] = {"emulated:h100", 1200, 1800};
  start();
  auto c = client(0);
  ASSERT_TRUE(c);
  for (int mhz : {1185, 1815, 1980, 345, 0, -5}) {
    Status st = c->lock_sm_clock(mhz);
    ASSERT_FALSE(st.ok()) << mhz;
    EXPECT_NE(st.error().what.find("outside the admin's range 1200..1800 MHz"), std::string::npos) << st.error().message();
  }
  Status st = c->lock_sm_clock(1401);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().what.find("not a clock"), std::string::npos) << st.error().message();
  EXPECT_NE(st.error().note.find("1395 or 1410 MHz"), std::string::npos) << st.error().note;
  Raw r(cfg_.socket);
  ASSERT_TRUE(ok_of(r.ask(R"({"op":"acquire","gpu":1})")));
  EXPECT_NE(err_of(r.ask(R"({"op":"lock","gpu":1,"mhz":99999999999999})")).find("outside"), std::string::npos);
  EXPECT_NE(err_of(r.ask(R"({"op":"lock","gpu":1,"mhz":1410.0})")).find("integer"), std::string::npos);
  EXPECT_NE(err_of(r.ask(R"({"op":"lock","gpu":1,"mhz":"1410"})")).find("integer"), std::string::npos);
  EXPECT_NE(err_of(r.ask(R"({"op":"lock","gpu":1})")).find("needs \"mhz\""), std::string::npos);
  EXPECT_EQ(dev0_.locks.load(), 0);
  EXPECT_EQ(dev1_.locks.load(), 0);
  EXPECT_TRUE(c->lock_sm_clock(1800).ok());
  EXPECT_NE(slurp(cfg_.log).find("op=lock mhz=1815 result=denied"), std::string::npos);
}

TEST_F(ClockdTest, AnotherClientsGpuIsOffLimits) {
  start();
  auto a = client(0);
  ASSERT_TRUE(a);
  ASSERT_TRUE(a->lock_sm_clock(1410).ok());
  auto b = ClockdClient::connect(cfg_.socket, 0);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().what.find("busy: gpu 0 is held by pid " + std::to_string(::getpid())), std::string::npos) << b.error().message();
  EXPECT_NE(b.error().where.find(cfg_.socket), std::string::npos);
  Raw r(cfg_.socket);
  for (const char* req : {R"({"op":"lock","gpu":0,"mhz":1005})", R"({"op":"reset","gpu":0})", R"({"op":"release","gpu":0})",
                          R"({"op":"acquire","gpu":0})"}) {
    json j = r.ask(req);
    EXPECT_FALSE(ok_of(j)) << req;
    EXPECT_NE(err_of(j).find("busy"), std::string::npos) << req << " -> " << j.dump();
  }
  EXPECT_EQ(dev0_.locked.load(), 1410);
  EXPECT_EQ(dev0_.locks.load(), 1);
  // The other GPU is free for b.
  auto b1 = client(1);
  ASSERT_TRUE(b1);
  EXPECT_TRUE(b1->lock_sm_clock(1500).ok());
  EXPECT_NE(slurp(cfg_.log).find("op=acquire mhz=- result=denied \"busy"), std::string::npos);
}

TEST_F(ClockdTest, TwoClientsRacingForOneGpuExactlyOneWins) {
  start();
  for (int round = 0; round < 10; ++round) {
    std::barrier sync(2);
    std::unique_ptr<ClockdClient> won[2];
    std::string lost[2];
    auto run = [&](int i) {
      sync.arrive_and_wait();
      auto c = ClockdClient::connect(cfg_.socket, 0);
      if (c.ok()) {
        won[i] = std::move(*c);
        (void)won[i]->lock_sm_clock(i == 0 ? 1410 : 1500);
      } else {
        lost[i] = c.error().what;
      }
    };
    std::thread t0(run, 0), t1(run, 1);
    t0.join();
    t1.join();
    ASSERT_NE(bool(won[0]), bool(won[1])) << "round " << round << ": " << lost[0] << " / " << lost[1];
    const int w = won[0] ? 0 : 1;
    EXPECT_NE(lost[1 - w].find("busy"), std::string::npos) << lost[1 - w];
    EXPECT_EQ(dev0_.locked.load(), w == 0 ? 1410 : 1500);
    won[w].reset();  // releases
    EXPECT_EQ(dev0_.locked.load(), 0);
  }
}

TEST_F(ClockdTest, ClientKilledMidLockIsResetWithinTheLease) {
  cfg_.lease_ms = 3000;
  start();
  // Everything the child needs is prepared before fork(): it runs only async-signal-safe calls.
  const sockaddr_un addr = addr_of(cfg_.socket);
  const std::string req = "{\"op\":\"hello\",\"client\":\"doomed\"}\n{\"op\":\"acquire\",\"gpu\":0}\n{\"op\":\"lock\",\"gpu\":0,\"mhz\":1305}\n";
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(ready[0]);
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) ::_exit(2);
    if (::write(fd, req.data(), req.size()) != ssize_t(req.size())) ::_exit(3);
    char buf[4096];
    int lines = 0;
    bool all_ok = true;
    while (lines < 3) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0) ::_exit(4);
      for (ssize_t i = 0; i < n; ++i) {
        if (buf[i] == '\n') ++lines;
        if (i + 10 < n && std::memcmp(buf + i, "\"ok\":false", 10) == 0) all_ok = false;
      }
    }
    const char c = all_ok ? 'R' : 'F';
    (void)!::write(ready[1], &c, 1);
    while (true) ::pause();  // holding the lock until killed
  }
  ::close(ready[1]);
  pollfd p{ready[0], POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1) << "the child never said it holds the lock";
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  EXPECT_EQ(c, 'R');
  EXPECT_EQ(dev0_.locked.load(), 1305);
  EXPECT_EQ(status()["gpus"][0]["holder"]["pid"], int(pid));
  const auto t0 = Clock::now();
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  int wstatus = 0;
  ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(wstatus));
  EXPECT_TRUE(wait_until([&] { return dev0_.locked.load() == 0; }, std::chrono::milliseconds(cfg_.lease_ms)));
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(cfg_.lease_ms));
  EXPECT_TRUE(wait_until([&] { return status()["gpus"][0]["holder"].is_null(); }, 1000ms));
  EXPECT_NE(slurp(cfg_.log).find("pid=" + std::to_string(pid) + " uid=" + std::to_string(::getuid()) +
                                 " client=doomed gpu=0 device=emulated:h100 op=disconnect mhz=- result=ok"),
            std::string::npos) << slurp(cfg_.log);
}

TEST_F(ClockdTest, AClientThatNeverReadsIsDropped) {
  start();
  Raw r(cfg_.socket);
  ASSERT_TRUE(ok_of(r.ask(R"({"op":"acquire","gpu":0})")));
  ASSERT_TRUE(ok_of(r.ask(R"({"op":"lock","gpu":0,"mhz":1410})")));
  std::string many;
  for (int i = 0; i < 200; ++i) many += "{\"op\":\"status\"}\n";
  // Megabytes of replies pile up unread; the daemon gives up on this client and resets its GPU.
  bool dropped = false;
  for (int i = 0; i < 200 && !dropped; ++i) {
    dropped = !r.send(many) || dev0_.locked.load() == 0;
  }
  EXPECT_TRUE(wait_until([&] { return dev0_.locked.load() == 0; }, 3000ms));
  EXPECT_NE(slurp(cfg_.log).find("does not read its replies"), std::string::npos);
  EXPECT_TRUE(ok_of(json::parse(clockd_status(cfg_.socket).value())));
}

TEST_F(ClockdTest, ManyClientsAndTheLimit) {
  cfg_.max_clients = 20;
  start();
  std::vector<std::unique_ptr<Raw>> raws;
  for (int i = 0; i < 20; ++i) {
    raws.push_back(std::make_unique<Raw>(cfg_.socket));
    ASSERT_TRUE(raws.back()->ok());
  }
  for (auto& r : raws) EXPECT_TRUE(ok_of(r->ask(R"({"op":"status"})")));
  Raw extra(cfg_.socket);
  auto l = extra.line();
  ASSERT_TRUE(l);
  EXPECT_NE(err_of(json::parse(*l)).find("too many clients"), std::string::npos);
  EXPECT_TRUE(extra.closed_by_peer());
  raws.pop_back();
  EXPECT_TRUE(wait_until([&] { return clockd_status(cfg_.socket).ok(); }, 2000ms));
}

// ---- the socket and the daemon's life ---------------------------------------------------------------

TEST_F(ClockdTest, StaleSocketIsReplacedAnythingElseIsKept) {
  {  // a socket nobody listens on: what a daemon killed with SIGKILL leaves behind
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    const sockaddr_un a = addr_of(cfg_.socket);
    ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a), 0);
    ::close(fd);
  }
  start();
  EXPECT_TRUE(ok_of(json::parse(clockd_status(cfg_.socket).value())));
  EXPECT_NE(slurp(cfg_.log).find("op=remove-stale-socket"), std::string::npos);
  // A second daemon on the same socket is refused while the first one listens, before it resets
  // the GPUs the first one's clients hold.
  auto holder = client(0);
  ASSERT_TRUE(holder);
  ASSERT_TRUE(holder->lock_sm_clock(1410).ok());
  const int resets = dev0_.resets.load();
  auto second = ClockdServer::make(cfg_, {&dev0_, &dev1_});
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.error().what.find("another emo clockd is listening"), std::string::npos) << second.error().message();
  EXPECT_EQ(dev0_.locked.load(), 1410);
  EXPECT_EQ(dev0_.resets.load(), resets);
  holder.reset();
  EXPECT_TRUE(ok_of(json::parse(clockd_status(cfg_.socket).value())));
  ASSERT_TRUE(stop().ok());
  EXPECT_FALSE(std::filesystem::exists(cfg_.socket));  // removed at stop

  // A regular file (or a link, a folder) at the socket path is never removed.
  for (const char* kind : {"file", "link", "dir"}) {
    const std::string path = dir_ + "/not-a-socket-" + kind;
    if (std::string(kind) == "file") std::ofstream(path) << "precious\n";
    if (std::string(kind) == "link") {
      ASSERT_EQ(::symlink(cfg_.log.c_str(), path.c_str()), 0);
    }
    if (std::string(kind) == "dir") std::filesystem::create_directory(path);
    ClockdConfig c = cfg_;
    c.socket = path;
    RecordingDevice e0(7), e1(8);
    auto s = ClockdServer::make(c, {&e0, &e1});
    ASSERT_FALSE(s.ok()) << kind;
    EXPECT_NE(s.error().what.find("is not a socket"), std::string::npos) << s.error().message();
    EXPECT_NE(s.error().message().find(path), std::string::npos);
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::symlink_status(path))) << kind;
  }
  EXPECT_EQ(slurp(dir_ + "/not-a-socket-file"), "precious\n");
  // A missing folder: an error that says what creates it.
  ClockdConfig c = cfg_;
  c.socket = dir_ + "/missing/clockd.sock";
  RecordingDevice e0(9), e1(10);
  auto s = ClockdServer::make(c, {&e0, &e1});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().note.find("RuntimeDirectory"), std::string::npos) << s.error().note;
}

TEST_F(ClockdTest, StopResetsEveryGpu) {
  start();
  auto a = client(0);
  auto b = client(1);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->lock_sm_clock(1410).ok());
  ASSERT_TRUE(b->lock_sm_clock(1500).ok());
  ASSERT_TRUE(stop().ok());
  EXPECT_EQ(dev0_.locked.load(), 0);
  EXPECT_EQ(dev1_.locked.load(), 0);
  EXPECT_FALSE(std::filesystem::exists(cfg_.socket));
  Status st = a->lock_sm_clock(1500);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().where.find(cfg_.socket), std::string::npos) << st.error().message();
  EXPECT_NE(slurp(cfg_.log).find("op=stop-reset mhz=- result=ok"), std::string::npos);
  // The clients' destructors cannot release any more: said and counted, never swallowed.
  const int before = clockd_client_reset_failures();
  testing::internal::CaptureStderr();
  a.reset();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(clockd_client_reset_failures(), before + 1);
  EXPECT_NE(err.find("error: clockd:" + cfg_.socket + "#0"), std::string::npos) << err;
  EXPECT_FALSE(b->release().ok());
}

TEST_F(ClockdTest, StopWithoutRunResetsToo) {
  {
    auto s = ClockdServer::make(cfg_, {&dev0_, &dev1_});
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE(dev0_.lock_sm_clock(1500).ok());
  }  // destroyed without run_until_stopped()
  EXPECT_EQ(dev0_.locked.load(), 0);
  EXPECT_FALSE(std::filesystem::exists(cfg_.socket));
}

TEST_F(ClockdTest, FailedResetIsRetriedLoggedCountedAndReported) {
  start();
  {  // two failures, then it works: retried, logged, not a failure
    Raw r(cfg_.socket);
    ASSERT_TRUE(ok_of(r.ask(R"({"op":"acquire","gpu":0})")));
    ASSERT_TRUE(ok_of(r.ask(R"({"op":"lock","gpu":0,"mhz":1410})")));
    dev0_.fail_resets = 2;
    const int resets = dev0_.resets.load();
    r.close();
    EXPECT_TRUE(wait_until([&] { return dev0_.locked.load() == 0; }, 3000ms));
    EXPECT_EQ(dev0_.resets.load(), resets + 3);
    EXPECT_EQ(server_->reset_failures(), 0);
    EXPECT_NE(slurp(cfg_.log).find("op=disconnect mhz=- result=error try=1/3"), std::string::npos) << slurp(cfg_.log);
  }
  // Every try fails: the client is told, the failure is counted, shown in status, retried later.
  auto c = client(0);
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->lock_sm_clock(1410).ok());
  dev0_.fail_resets = 3;
  Status st = c->reset_sm_clock();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().what.find("could not be reset after 3 tries"), std::string::npos) << st.error().message();
  EXPECT_EQ(server_->reset_failures(), 1);
  json s = status();
  EXPECT_EQ(s["reset_failures"], 1);
  EXPECT_EQ(s["gpus"][0]["reset_failures"], 1);
  EXPECT_EQ(s["gpus"][0]["reset_pending"], true);
  EXPECT_NE(slurp(cfg_.log).find("op=reset mhz=- result=FAILED"), std::string::npos);
  // The release resets again (now it works) and frees the lease.
  EXPECT_TRUE(c->release().ok());
  EXPECT_EQ(dev0_.locked.load(), 0);
  EXPECT_EQ(status()["gpus"][0]["reset_pending"], false);
  c.reset();
  // The daemon's exit says so: run_until_stopped() returns an Error naming the count.
  Status down = stop();
  ASSERT_FALSE(down.ok());
  EXPECT_NE(down.error().what.find("1 SM clock reset failed"), std::string::npos) << down.error().message();
  EXPECT_EQ(down.error().what.find("may still be locked"), std::string::npos) << down.error().message();
}

TEST_F(ClockdTest, AResetStillFailingAtStopIsNamed) {
  start();
  auto c = client(1);
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->lock_sm_clock(1410).ok());
  dev1_.fail_resets = 1000;
  Status rel = c->release();
  ASSERT_FALSE(rel.ok());
  EXPECT_NE(rel.error().what.find("the lease was released"), std::string::npos) << rel.error().message();
  c.reset();
  Status down = stop();
  ASSERT_FALSE(down.ok());
  EXPECT_NE(down.error().what.find("gpu 1 (emulated:h100@2) may still be locked"), std::string::npos) << down.error().message();
  EXPECT_EQ(dev1_.locked.load(), 1410);
  dev1_.fail_resets = 0;
}

TEST_F(ClockdTest, StartRefusesAGpuItCannotReset) {
  dev1_.fail_resets = 3;
  auto s = ClockdServer::make(cfg_, {&dev0_, &dev1_});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("could not reset the SM clock at start"), std::string::npos) << s.error().message();
  EXPECT_FALSE(std::filesystem::exists(cfg_.socket));
  dev1_.fail_resets = 2;  // retried: starts
  auto t = ClockdServer::make(cfg_, {&dev0_, &dev1_});
  EXPECT_TRUE(t.ok()) << t.error().message();
}

TEST_F(ClockdTest, GroupSocketModeAndPeerCheck) {
  cfg_.group = std::to_string(::getgid());  // this process's own group, by number
  start();
  struct stat st {};
  ASSERT_EQ(::stat(cfg_.socket.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  EXPECT_EQ(st.st_gid, ::getgid());
  // This process is the daemon's own user: allowed.
  EXPECT_TRUE(clockd_status(cfg_.socket).ok());
}

// ---- the client's bounded waits ---------------------------------------------------------------------

TEST_F(ClockdTest, ClientErrorsNameTheSocketAndNeverHang) {
  auto none = ClockdClient::connect(dir_ + "/nobody.sock", 0);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().where, "clockd:" + dir_ + "/nobody.sock");
  EXPECT_NE(none.error().note.find("emo clockd running"), std::string::npos);
  // A listener that never answers: the client gives up after its timeout.
  const std::string mute = dir_ + "/mute.sock";
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  const sockaddr_un a = addr_of(mute);
  ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  ClockdClient::Options o;
  o.timeout_ms = 200;
  const auto t0 = Clock::now();
  auto c = ClockdClient::connect(mute, 0, o);
  ASSERT_FALSE(c.ok());
  EXPECT_LT(Clock::now() - t0, 2s);
  EXPECT_NE(c.error().what.find("no reply from the daemon within 200 ms"), std::string::npos) << c.error().message();
  auto s = clockd_status(mute, 200);
  EXPECT_FALSE(s.ok());
  ::close(fd);
  // Nothing listening any more: refused.
  auto refused = clockd_status(mute, 200);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().what.find("refused"), std::string::npos) << refused.error().message();
}

TEST_F(ClockdTest, LostLeaseIsReportedByTheNextLock) {
  cfg_.lease_ms = 300;
  start();
  auto c = client(0);
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->lock_sm_clock(1410).ok());
  ASSERT_TRUE(stop().ok());  // the daemon goes away: the renewal fails
  EXPECT_EQ(dev0_.locked.load(), 0);
  std::this_thread::sleep_for(400ms);
  Status st = c->lock_sm_clock(1500);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find(cfg_.socket), std::string::npos) << st.error().message();
  testing::internal::CaptureStderr();
  c.reset();
  (void)testing::internal::GetCapturedStderr();
}

}  // namespace
}  // namespace emo::runtime
