// The single-process world, the in-memory world of the tests and the helpers every world shares
// (include/emo/dist/dist.h). MPI's world is in mpi.cpp.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <deque>
#include <map>
#include <mutex>
#include <tuple>

#include <fmt/format.h>

#include "emo/dist/dist.h"
#include "mpi_world.h"

namespace emo::dist {

namespace {

class SelfComm final : public Comm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Status send(int to, int, std::string) override {
    return make_error("", fmt::format("no process {} to send to: this run is one process", to));
  }
  Status flush(double) override { return {}; }
  Result<std::string> recv(int from, int, double) override {
    return make_error("", fmt::format("no process {} to receive from: this run is one process", from));
  }
  Result<std::pair<int, std::string>> recv_any(int, double) override {
    return make_error("", "no other process to receive from: this run is one process");
  }
};

// Queues keyed by (from, to, tag), shared by the comms of one local_world().
struct Mailbox {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::tuple<int, int, int>, std::deque<std::string>> queues;
};

class LocalComm final : public Comm {
 public:
  LocalComm(std::shared_ptr<Mailbox> box, int rank, int size) : box_(std::move(box)), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status send(int to, int tag, std::string bytes) override {
    if (to < 0 || to >= size_) return make_error("", fmt::format("no process {} in a run of {}", to, size_));
    {
      std::lock_guard<std::mutex> lock(box_->mu);
      box_->queues[{rank_, to, tag}].push_back(std::move(bytes));
    }
    box_->cv.notify_all();
    return {};
  }
  Status flush(double) override { return {}; }  // the queues hold what is sent
  Result<std::pair<int, std::string>> recv_any(int tag, double timeout_s) override {
    std::unique_lock<std::mutex> lock(box_->mu);
    std::deque<std::string>* ready = nullptr;
    int from = -1;
    const auto find = [&] {
      for (int p = 0; p < size_; ++p) {
        auto it = box_->queues.find({p, rank_, tag});
        if (it != box_->queues.end() && !it->second.empty()) {
          ready = &it->second;
          from = p;
          return true;
        }
      }
      return false;
    };
    if (!box_->cv.wait_for(lock, std::chrono::duration<double>(timeout_s), find))
      return make_error("", fmt::format("no process sent anything for {:g} s", timeout_s));
    std::string m = std::move(ready->front());
    ready->pop_front();
    return std::pair<int, std::string>{from, std::move(m)};
  }
  Result<std::string> recv(int from, int tag, double timeout_s) override {
    if (from < 0 || from >= size_) return make_error("", fmt::format("no process {} in a run of {}", from, size_));
    std::unique_lock<std::mutex> lock(box_->mu);
    auto& q = box_->queues[{from, rank_, tag}];
    const bool got = box_->cv.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return !q.empty(); });
    if (!got) return make_error("", fmt::format("process {} sent nothing for {:g} s", from, timeout_s));
    std::string m = std::move(q.front());
    q.pop_front();
    return m;
  }

 private:
  std::shared_ptr<Mailbox> box_;
  int rank_, size_;
};

}  // namespace

Comm& self() {
  static SelfComm comm;
  return comm;
}

Comm& world() {
  Comm* mpi = detail::mpi_world();
  return mpi ? *mpi : self();
}

double timeout_s() {
  if (const char* v = std::getenv("EMO_MPI_TIMEOUT_S")) {
    char* end = nullptr;
    const double s = std::strtod(v, &end);
    if (end != v && *end == '\0' && s > 0) return s;
  }
  return 600.0;
}

std::pair<size_t, size_t> shard(size_t n, int p, int size) {
  const auto P = static_cast<size_t>(size < 1 ? 1 : size);
  const auto i = static_cast<size_t>(p < 0 ? 0 : p);
  const size_t base = n / P, extra = n % P;
  const size_t begin = i * base + std::min(i, extra);
  return {std::min(begin, n), std::min(begin + base + (i < extra ? 1 : 0), n)};
}

std::vector<size_t> shard_by_weight(const std::vector<uint64_t>& weights, int size) {
  const auto P = static_cast<size_t>(size < 1 ? 1 : size);
  long double total = 0;
  for (uint64_t w : weights) total += static_cast<long double>(w);
  std::vector<size_t> bounds(P + 1, weights.size());
  bounds[0] = 0;
  long double before = 0;
  size_t p = 0;  // the part of the item at i
  for (size_t i = 0; i < weights.size(); ++i) {
    const long double middle = before + static_cast<long double>(weights[i]) / 2;
    const size_t part = total > 0 ? std::min(P - 1, static_cast<size_t>(middle * static_cast<long double>(P) / total))
                                  : std::min(P - 1, i * P / weights.size());
    while (p < part) bounds[++p] = i;
    before += static_cast<long double>(weights[i]);
  }
  return bounds;
}

std::vector<std::unique_ptr<Comm>> local_world(int size) {
  auto box = std::make_shared<Mailbox>();
  std::vector<std::unique_ptr<Comm>> out;
  for (int i = 0; i < size; ++i) out.push_back(std::make_unique<LocalComm>(box, i, size));
  return out;
}

std::string to_bytes(const std::vector<int64_t>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(int64_t));
}
Result<std::vector<int64_t>> from_bytes(std::string_view b, int from) {
  if (b.size() % sizeof(int64_t) != 0) {
    return make_error("", fmt::format("a message from process {} arrived cut short", from));
  }
  std::vector<int64_t> v(b.size() / sizeof(int64_t));
  if (!v.empty()) std::memcpy(v.data(), b.data(), b.size());
  return v;
}

Result<std::vector<int64_t>> all_combine(
    Comm& comm, int tag, const std::vector<int64_t>& mine,
    const std::function<std::vector<int64_t>(const std::vector<std::vector<int64_t>>& parts)>& combine) {
  const double wait = timeout_s();
  if (!comm.is_root()) {
    EMO_RETURN_IF_ERROR(comm.send(kRoot, tag, to_bytes(mine)));
    auto m = comm.recv(kRoot, tag, wait);
    if (!m) return m.error();
    return from_bytes(*m, kRoot);
  }
  std::vector<std::vector<int64_t>> parts{mine};
  for (int p = 1; p < comm.size(); ++p) {
    auto m = comm.recv(p, tag, wait);
    if (!m) return m.error();
    auto v = from_bytes(*m, p);
    if (!v) return v.error();
    parts.push_back(std::move(*v));
  }
  std::vector<int64_t> out = combine(parts);
  for (int p = 1; p < comm.size(); ++p) EMO_RETURN_IF_ERROR(comm.send(p, tag, to_bytes(out)));
  return out;
}

Result<std::vector<std::string>> all_gather(Comm& comm, int tag, std::string mine) {
  const double wait = timeout_s();
  if (!comm.is_root()) {
    EMO_RETURN_IF_ERROR(comm.send(kRoot, tag, std::move(mine)));
    auto m = comm.recv(kRoot, tag, wait);
    if (!m) return m.error();
    auto fields = unframe(*m);
    if (!fields || int(fields->size()) != comm.size()) {
      return make_error("", fmt::format("a message from process {} arrived cut short or corrupt", kRoot));
    }
    return std::vector<std::string>(fields->begin(), fields->end());
  }
  std::vector<std::string> parts{std::move(mine)};
  for (int p = 1; p < comm.size(); ++p) {
    auto m = comm.recv(p, tag, wait);
    if (!m) return m.error();
    parts.push_back(std::move(*m));
  }
  if (comm.size() > 1) {
    const std::string all = frame(std::vector<std::string_view>(parts.begin(), parts.end()));
    for (int p = 1; p < comm.size(); ++p) EMO_RETURN_IF_ERROR(comm.send(p, tag, all));
  }
  return parts;
}

Status first_error(Comm& comm, int tag, const Status& mine) {
  const std::string bytes =
      mine.ok() ? frame({"K"}) : frame({"E", mine.error().where, mine.error().what, mine.error().note});
  auto all = all_gather(comm, tag, bytes);
  if (!all) return all.error();
  for (size_t q = 0; q < all->size(); ++q) {
    auto f = unframe((*all)[q]);
    if (f && f->size() == 1 && (*f)[0] == "K") continue;
    if (!f || f->size() != 4 || (*f)[0] != "E")
      return make_error("", fmt::format("a message from process {} arrived cut short or corrupt", q));
    return make_error(std::string((*f)[1]), std::string((*f)[2]), std::string((*f)[3]));
  }
  return {};
}

Result<std::vector<int64_t>> upper_medians(Comm& comm, int tag, std::vector<std::vector<int64_t>>& values,
                                           int64_t fallback) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();
  const size_t sets = values.size();
  // Each set's count, least and greatest value over every process.
  std::vector<int64_t> mine(3 * sets);
  for (size_t k = 0; k < sets; ++k) {
    std::sort(values[k].begin(), values[k].end());
    mine[3 * k] = int64_t(values[k].size());
    mine[3 * k + 1] = values[k].empty() ? kMax : values[k].front();
    mine[3 * k + 2] = values[k].empty() ? kMin : values[k].back();
  }
  auto totals = all_combine(comm, tag, mine, [sets](const std::vector<std::vector<int64_t>>& parts) {
    std::vector<int64_t> t(3 * sets, 0);
    for (size_t k = 0; k < sets; ++k) t[3 * k + 1] = kMax, t[3 * k + 2] = kMin;
    for (const auto& v : parts) {
      for (size_t k = 0; k < sets && 3 * k + 2 < v.size(); ++k) {
        t[3 * k] += v[3 * k];
        t[3 * k + 1] = std::min(t[3 * k + 1], v[3 * k + 1]);
        t[3 * k + 2] = std::max(t[3 * k + 2], v[3 * k + 2]);
      }
    }
    return t;
  });
  if (!totals) return totals.error();
  if (totals->size() != 3 * sets) return make_error("", "the medians' counts arrived cut short");
  // The median of set k is the least x with at least n/2 + 1 values <= x: bisect [lo, hi] until they meet.
  std::vector<int64_t> lo(sets), hi(sets), need(sets);
  for (size_t k = 0; k < sets; ++k) {
    lo[k] = (*totals)[3 * k + 1];
    hi[k] = (*totals)[3 * k + 2];
    need[k] = (*totals)[3 * k] / 2 + 1;
  }
  const auto open = [&] {
    for (size_t k = 0; k < sets; ++k) {
      if ((*totals)[3 * k] > 0 && lo[k] < hi[k]) return true;
    }
    return false;
  };
  while (open()) {
    std::vector<int64_t> mid(sets), count(sets, 0);
    for (size_t k = 0; k < sets; ++k) {
      // The midpoint rounded toward lo, without overflow across the whole int64 range.
      mid[k] = lo[k] < hi[k] ? lo[k] + int64_t((uint64_t(hi[k]) - uint64_t(lo[k])) / 2) : lo[k];
      count[k] = int64_t(std::upper_bound(values[k].begin(), values[k].end(), mid[k]) - values[k].begin());
    }
    auto sums = all_combine(comm, tag, count, [sets](const std::vector<std::vector<int64_t>>& parts) {
      std::vector<int64_t> t(sets, 0);
      for (const auto& v : parts) {
        for (size_t k = 0; k < sets && k < v.size(); ++k) t[k] += v[k];
      }
      return t;
    });
    if (!sums) return sums.error();
    if (sums->size() != sets) return make_error("", "the medians' counts arrived cut short");
    for (size_t k = 0; k < sets; ++k) {
      if (lo[k] >= hi[k]) continue;
      if ((*sums)[k] >= need[k]) hi[k] = mid[k];
      else lo[k] = mid[k] + 1;
    }
  }
  std::vector<int64_t> out(sets, fallback);
  for (size_t k = 0; k < sets; ++k) {
    if ((*totals)[3 * k] > 0) out[k] = lo[k];
  }
  return out;
}

std::string frame(const std::vector<std::string_view>& fields) {
  std::string out;
  const auto put = [&](uint64_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(fields.size());
  for (std::string_view f : fields) {
    put(f.size());
    out.append(f.data(), f.size());
  }
  return out;
}

Result<std::vector<std::string_view>> unframe(std::string_view bytes) {
  size_t at = 0;
  bool ok = true;
  const auto get = [&]() -> uint64_t {
    uint64_t v = 0;
    if (bytes.size() - at < sizeof v) {
      ok = false;
      return 0;
    }
    std::memcpy(&v, bytes.data() + at, sizeof v);
    at += sizeof v;
    return v;
  };
  const uint64_t n = get();
  std::vector<std::string_view> fields;
  for (uint64_t i = 0; ok && i < n; ++i) {
    const uint64_t len = get();
    if (!ok || len > bytes.size() - at) {
      ok = false;
      break;
    }
    fields.push_back(bytes.substr(at, len));
    at += len;
  }
  if (!ok || at != bytes.size()) return make_error("", "a message from another process arrived cut short or corrupt");
  return fields;
}

}  // namespace emo::dist
