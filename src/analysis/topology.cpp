// Collectives' transfer times from a topology (emo/analysis/topology.h, docs/replay.md "Topology").
#include "emo/analysis/topology.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "emo/analysis/analysis.h"
#include "emo/base/file_util.h"
#include "emo/dist/dist.h"
#include "internal.h"

namespace emo::analysis {

using graph::NodeId;
using graph::NodeKind;
using nlohmann::json;

namespace {

constexpr const char* kTopologyNote =
    "a topology file: {\"gpus_per_host\": 8, \"intra_host\": {\"bandwidth_gb_s\": 150, \"latency_us\": 5}, "
    "\"inter_host\": {\"bandwidth_gb_s\": 25, \"latency_us\": 10}} (docs/replay.md, Topology)";
// Beyond any real link: 100 TB/s per GPU, a second per step.
constexpr double kMaxBandwidthGbS = 1e5;
constexpr double kMaxLatencyUs = 1e6;
constexpr int kMaxGpusPerHost = 1 << 16;
constexpr int kMaxHosts = 1 << 20;

Result<Link> parse_link(const json& j, const std::string& where, const char* field) {
  if (!j.contains(field)) return make_error(where, fmt::format("missing field '{}'", field), kTopologyNote);
  const json& l = j[field];
  if (!l.is_object()) return make_error(where, fmt::format("field '{}': expected an object", field), kTopologyNote);
  Link out;
  const struct {
    const char* name;
    double* v;
    double lo, hi;
    bool open_lo;
  } fields[] = {{"bandwidth_gb_s", &out.bandwidth_gb_s, 0, kMaxBandwidthGbS, true},
                {"latency_us", &out.latency_us, 0, kMaxLatencyUs, false}};
  for (const auto& f : fields) {
    if (!l.contains(f.name) || !l[f.name].is_number())
      return make_error(where, fmt::format("field '{}.{}': expected a number", field, f.name), kTopologyNote);
    const double v = l[f.name].get<double>();
    if (!std::isfinite(v) || (f.open_lo ? v <= f.lo : v < f.lo) || v > f.hi)
      return make_error(where, fmt::format("field '{}.{}': must be {} {} and at most {:g}, got {}", field, f.name,
                                           f.open_lo ? ">" : ">=", f.lo, f.hi, l[f.name].dump()));
    *f.v = v;
  }
  return out;
}

Result<int> positive_int(const json& j, const std::string& where, const char* field, int hi) {
  const json& v = j[field];
  if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > hi)
    return make_error(where, fmt::format("field '{}': expected a whole number from 1 to {}, got {}", field, hi, v.dump()));
  return int(v.get<int64_t>());
}

std::string lower_letters(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c))) out += char(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

int ceil_log2(size_t n) {
  int k = 0;
  while ((size_t(1) << k) < n) ++k;
  return k;
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  auto mid = v.begin() + std::ptrdiff_t(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  if (v.size() % 2 == 1) return *mid;
  return 0.5 * (*mid + *std::max_element(v.begin(), mid));
}

}  // namespace

int Topology::host_of(int rank) const {
  if (rank < 0) return -1;
  if (!placement.empty()) return size_t(rank) < placement.size() ? placement[size_t(rank)] : -1;
  const int h = rank / gpus_per_host;
  return hosts > 0 && h >= hosts ? -1 : h;
}

Result<Topology> topology_from_json(std::string_view text, const std::string& where) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return make_error(where, "not valid JSON", kTopologyNote);
  if (!j.is_object()) return make_error(where, "a topology is a JSON object", kTopologyNote);
  static const std::set<std::string> known = {"gpus_per_host", "hosts", "intra_host", "inter_host", "algorithm",
                                              "placement", "base_latency_us", "comment"};
  for (const auto& [k, v] : j.items()) {
    if (!known.count(k)) return make_error(where, fmt::format("unknown field '{}'", k), kTopologyNote);
  }
  Topology t;
  t.source = where;
  if (!j.contains("gpus_per_host")) return make_error(where, "missing field 'gpus_per_host'", kTopologyNote);
  auto g = positive_int(j, where, "gpus_per_host", kMaxGpusPerHost);
  if (!g) return g.error();
  t.gpus_per_host = *g;
  if (j.contains("hosts")) {
    auto h = positive_int(j, where, "hosts", kMaxHosts);
    if (!h) return h.error();
    t.hosts = *h;
  }
  auto intra = parse_link(j, where, "intra_host");
  if (!intra) return intra.error();
  t.intra = *intra;
  if (j.contains("inter_host")) {
    auto inter = parse_link(j, where, "inter_host");
    if (!inter) return inter.error();
    t.inter = *inter;
  } else if (t.hosts > 1) {
    return make_error(where, "missing field 'inter_host': the topology has more than one host", kTopologyNote);
  }
  if (j.contains("base_latency_us")) {
    const json& b = j["base_latency_us"];
    if (!b.is_number() || !std::isfinite(b.get<double>()) || b.get<double>() < 0 || b.get<double>() > kMaxLatencyUs)
      return make_error(where, fmt::format("field 'base_latency_us': must be a number from 0 to {:g}, got {}", kMaxLatencyUs,
                                           b.dump()));
    t.base_latency_us = b.get<double>();
  }
  if (j.contains("algorithm")) {
    const json& a = j["algorithm"];
    const std::string s = a.is_string() ? a.get<std::string>() : "";
    if (s == "ring") t.algorithm = Algorithm::kRing;
    else if (s == "tree") t.algorithm = Algorithm::kTree;
    else if (s == "auto") t.algorithm = Algorithm::kAuto;
    else return make_error(where, fmt::format("field 'algorithm': expected \"ring\", \"tree\" or \"auto\", got {}", a.dump()));
  }
  if (j.contains("placement")) {
    const json& p = j["placement"];
    if (!p.is_array() || p.empty())
      return make_error(where, "field 'placement': expected a list of hosts, one per rank (rank 0 first)");
    std::map<int, int> per_host;
    for (size_t i = 0; i < p.size(); ++i) {
      const int hi = t.hosts > 0 ? t.hosts - 1 : kMaxHosts - 1;
      if (!p[i].is_number_integer() || p[i].get<int64_t>() < 0 || p[i].get<int64_t>() > hi)
        return make_error(where, fmt::format("field 'placement': rank {}'s host must be a whole number from 0 to {}, got {}",
                                             i, hi, p[i].dump()));
      const int h = int(p[i].get<int64_t>());
      if (++per_host[h] > t.gpus_per_host)
        return make_error(where, fmt::format("field 'placement': host {} is given more than gpus_per_host = {} ranks "
                                             "(rank {} is one too many)",
                                             h, t.gpus_per_host, i));
      t.placement.push_back(h);
    }
    if (t.inter.bandwidth_gb_s == 0 && per_host.size() > 1)
      return make_error(where, "missing field 'inter_host': the placement uses more than one host", kTopologyNote);
  }
  return t;
}

Result<Topology> load_topology(const std::string& path) {
  auto text = read_file(path);
  if (!text) return text.error();
  return topology_from_json(*text, path);
}

const char* to_string(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllReduce: return "all_reduce";
    case CollectiveKind::kAllGather: return "all_gather";
    case CollectiveKind::kReduceScatter: return "reduce_scatter";
    case CollectiveKind::kAllToAll: return "all_to_all";
    case CollectiveKind::kBroadcast: return "broadcast";
    case CollectiveKind::kReduce: return "reduce";
    case CollectiveKind::kPointToPoint: return "send_recv";
    case CollectiveKind::kBarrier: return "barrier";
    case CollectiveKind::kUnknown: break;
  }
  return "unknown";
}

CollectiveKind collective_kind(std::string_view collective_name, std::string_view kernel_name) {
  auto of = [](const std::string& s) {
    // Longest names first: "reducescatter" holds "reduce", "allreduce" holds "reduce".
    if (s.find("allreduce") != std::string::npos) return CollectiveKind::kAllReduce;
    if (s.find("reducescatter") != std::string::npos) return CollectiveKind::kReduceScatter;
    if (s.find("allgather") != std::string::npos) return CollectiveKind::kAllGather;
    if (s.find("alltoall") != std::string::npos) return CollectiveKind::kAllToAll;
    if (s.find("broadcast") != std::string::npos) return CollectiveKind::kBroadcast;
    if (s.find("barrier") != std::string::npos) return CollectiveKind::kBarrier;
    if (s.find("sendrecv") != std::string::npos || s == "send" || s == "recv" || s.find("p2p") != std::string::npos)
      return CollectiveKind::kPointToPoint;
    if (s.find("reduce") != std::string::npos) return CollectiveKind::kReduce;
    return CollectiveKind::kUnknown;
  };
  CollectiveKind k = of(lower_letters(collective_name));
  if (k != CollectiveKind::kUnknown) return k;
  // NCCL kernel names: ncclKernel_<Collective>_<ALGO>_<PROTO>_<op>_<type>, ncclDevKernel_<Collective>_...
  std::string name = lower_letters(kernel_name.substr(0, kernel_name.find('(')));
  if (name.rfind("nccl", 0) != 0 && name.rfind("rccl", 0) != 0) return CollectiveKind::kUnknown;
  // Drop the reduction op words ("..._Sum_float") so that "Broadcast_RING_LL_Sum" is a broadcast.
  return of(name);
}

int dtype_bytes(std::string_view dtype) {
  const std::string d = lower_letters(dtype);
  if (d.empty()) return 0;
  static const std::pair<const char*, int> table[] = {
      {"float64", 8}, {"double", 8}, {"complexfloat", 8}, {"long", 8}, {"longint", 8}, {"int64", 8}, {"uint64", 8},
      {"float32", 4}, {"float", 4}, {"int32", 4}, {"int", 4}, {"uint32", 4},
      {"bfloat16", 2}, {"half", 2}, {"float16", 2}, {"short", 2}, {"int16", 2}, {"uint16", 2},
      {"float8e4m3fn", 1}, {"float8e5m2", 1}, {"float8e4m3fnuz", 1}, {"float8e5m2fnuz", 1},
      {"byte", 1}, {"char", 1}, {"bool", 1}, {"int8", 1}, {"uint8", 1}};
  for (const auto& [n, b] : table) {
    if (d == n) return b;
  }
  return 0;
}

namespace {

// The alpha-beta terms of a collective that runs over one kind of link: time = steps × latency +
// bytes / bandwidth (an all-to-all over two kinds of link is not one such sum).
struct Terms {
  double steps = 0, bytes = 0;
  double ns(const Link& l) const { return steps * l.latency_us * 1000.0 + bytes / l.bandwidth_gb_s; }
};

// Weighted least squares of m ≈ Σ_k x_k·a_k with every x_k >= 0 and x_last (the bandwidth's inverse) > 0:
// the unconstrained solution over each subset of the terms that keeps the last, the feasible one with the
// least weighted squared error. Rows are (a_0 .. a_{K-1}, m), weights 1/m² (relative error).
template <size_t K>
std::optional<std::array<double, K>> fit_nonnegative(const std::vector<std::array<double, K + 1>>& rows) {
  std::optional<std::array<double, K>> best;
  double best_sse = std::numeric_limits<double>::infinity();
  for (unsigned mask = 1u << (K - 1); mask < (1u << K); ++mask) {
    std::vector<size_t> use;
    for (size_t k = 0; k < K; ++k) {
      if (mask >> k & 1u) use.push_back(k);
    }
    const size_t u = use.size();
    // Normal equations (u × u), solved by Gauss-Jordan elimination with partial pivoting.
    std::array<std::array<double, K + 1>, K> a{};
    for (const auto& r : rows) {
      const double w = 1.0 / (r[K] * r[K]);
      for (size_t i = 0; i < u; ++i) {
        for (size_t j = 0; j < u; ++j) a[i][j] += w * r[use[i]] * r[use[j]];
        a[i][u] += w * r[use[i]] * r[K];
      }
    }
    bool singular = false;
    for (size_t c = 0; c < u && !singular; ++c) {
      size_t piv = c;
      for (size_t i = c + 1; i < u; ++i) {
        if (std::abs(a[i][c]) > std::abs(a[piv][c])) piv = i;
      }
      std::swap(a[c], a[piv]);
      double scale = 0;
      for (size_t j = 0; j < u; ++j) scale = std::max(scale, std::abs(a[c][j]));
      if (!(std::abs(a[c][c]) > 1e-12 * scale)) singular = true;
      for (size_t i = 0; i < u && !singular; ++i) {
        if (i == c) continue;
        const double f = a[i][c] / a[c][c];
        for (size_t j = c; j <= u; ++j) a[i][j] -= f * a[c][j];
      }
    }
    if (singular) continue;
    std::array<double, K> x{};
    bool feasible = true;
    for (size_t i = 0; i < u; ++i) {
      x[use[i]] = a[i][u] / a[i][i];
      if (!std::isfinite(x[use[i]]) || x[use[i]] < 0) feasible = false;
    }
    if (!feasible || !(x[K - 1] > 0)) continue;
    double sse = 0;
    for (const auto& r : rows) {
      double fit = 0;
      for (size_t k = 0; k < K; ++k) fit += x[k] * r[k];
      sse += (fit - r[K]) * (fit - r[K]) / (r[K] * r[K]);
    }
    if (sse < best_sse) best_sse = sse, best = x;
  }
  return best;
}

Terms terms_of(CollectiveKind kind, size_t n, double s, bool tree) {
  const double nn = double(n);
  if (n <= 1) return {1, 0};
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return tree ? Terms{2.0 * ceil_log2(n), 2 * s} : Terms{2 * (nn - 1), 2 * (nn - 1) / nn * s};
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllToAll: return {kind == CollectiveKind::kAllToAll ? 1 : nn - 1, (nn - 1) / nn * s};
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kReduce: return {nn - 1, s};
    case CollectiveKind::kPointToPoint: return {1, s};
    case CollectiveKind::kBarrier: return {2.0 * ceil_log2(n), 0};
    case CollectiveKind::kUnknown: break;
  }
  return {};
}

CollectiveKind effective_kind(const CollectiveShape& c) {
  // NCCL's all_to_all is SendRecv kernels on every member.
  return c.kind == CollectiveKind::kPointToPoint && c.members.size() > 2 ? CollectiveKind::kAllToAll : c.kind;
}

}  // namespace

Result<double> transfer_ns(const Topology& t, const CollectiveShape& c) {
  const size_t n = c.members.size();
  std::map<int, int> per_host;
  for (int r : c.members) {
    const int h = t.host_of(r);
    if (h < 0)
      return make_error(t.source, fmt::format("rank {} is on no host of the topology ({} GPUs per host{})", r,
                                              t.gpus_per_host,
                                              t.placement.empty() ? (t.hosts > 0 ? fmt::format(", {} hosts", t.hosts) : "")
                                                                  : fmt::format(", placement of {} ranks", t.placement.size())),
                        "give every rank of the step a host: more hosts, or a longer placement");
    ++per_host[h];
  }
  const bool across = per_host.size() > 1;
  if (across && t.inter.bandwidth_gb_s <= 0)
    return make_error(t.source, "the step's collectives cross hosts but the topology has no 'inter_host' link",
                      kTopologyNote);
  const Link& link = across ? t.inter : t.intra;
  const double base = t.base_latency_us * 1000.0;  // once per collective (NCCL's launch and set-up)
  const double s = double(std::max<int64_t>(0, c.bytes));
  const CollectiveKind kind = effective_kind(c);
  if (kind == CollectiveKind::kUnknown) return make_error(t.source, "a collective of unknown kind has no transfer model");
  if (kind == CollectiveKind::kAllToAll && across && n > 1) {
    // Every rank sends 1/n of its buffer to each peer at once: to its peers on its host over NVLink, to
    // the others over the network; the slowest rank sets the time.
    double worst = 0;
    for (const auto& [h, local] : per_host) {
      const double near = double(local - 1) / double(n) * s / t.intra.bandwidth_gb_s;
      const double far = double(int(n) - local) / double(n) * s / t.inter.bandwidth_gb_s;
      worst = std::max({worst, near, far});
    }
    return base + t.inter.latency_us * 1000.0 + worst;
  }
  const double ring = terms_of(kind, n, s, false).ns(link);
  if (kind != CollectiveKind::kAllReduce || t.algorithm == Algorithm::kRing) return base + ring;
  const double tree = terms_of(kind, n, s, true).ns(link);
  return base + (t.algorithm == Algorithm::kTree ? tree : std::min(ring, tree));
}

namespace {

std::vector<FittedLink> fit_links(const std::vector<TopologyCollective>& cs, const Topology& t) {
  std::vector<FittedLink> out;
  for (int across = 0; across < 2; ++across) {
    // Rows (1, steps, bytes, measured): t_i = base + steps_i·latency + bytes_i / bandwidth.
    std::vector<std::array<double, 4>> rows;
    for (const auto& c : cs) {
      if (c.measured_ns <= 0 || c.shape.members.size() < 2) continue;
      std::set<int> hosts;
      for (int r : c.shape.members) hosts.insert(t.host_of(r));
      if (int(hosts.size() > 1) != across) continue;
      if (across && c.shape.kind == CollectiveKind::kAllToAll) continue;  // two links at once: not one sum
      const Terms tm =
          terms_of(c.shape.kind, c.shape.members.size(), double(c.shape.bytes), t.algorithm == Algorithm::kTree);
      rows.push_back({1.0, tm.steps, tm.bytes, c.measured_ns});
    }
    if (rows.size() < 2) continue;
    auto x = fit_nonnegative<3>(rows);
    if (!x) continue;
    const auto [base, lat, inv_bw] = *x;
    FittedLink f;
    f.link = across ? "inter_host" : "intra_host";
    f.collectives = int64_t(rows.size());
    f.base_latency_us = base / 1000.0;
    f.fitted.bandwidth_gb_s = 1.0 / inv_bw;
    f.fitted.latency_us = lat / 1000.0;
    std::vector<double> err;
    for (const auto& [one, a, b, m] : rows) err.push_back(100.0 * std::abs(one * base + a * lat + b * inv_bw - m) / m);
    f.median_error_pct = median_of(err);
    out.push_back(f);
  }
  return out;
}

// The buffer a collective moves, bytes (an all-gather's output, the others' input); -1 when the trace
// does not say. A 2023-era trace gives only the input (its `nccl:` annotation's Input Dims): an
// all-gather's output is then the input of every member.
int64_t message_bytes(const trace::RankTrace& t, const trace::CollectiveArgs& ca, CollectiveKind kind,
                      int64_t members) {
  const int eb = dtype_bytes(t.strings.view(ca.dtype));
  int64_t nelems = ca.in_nelems != trace::kNone ? ca.in_nelems : ca.out_nelems;
  if (kind == CollectiveKind::kAllGather) {
    if (ca.out_nelems != trace::kNone) nelems = ca.out_nelems;
    else if (nelems != trace::kNone && __builtin_mul_overflow(nelems, members, &nelems)) return -1;
  }
  int64_t bytes = 0;
  if (nelems == trace::kNone || nelems < 0 || eb <= 0 || __builtin_mul_overflow(nelems, int64_t{eb}, &bytes)) return -1;
  return bytes;
}

}  // namespace

namespace {

// A matched collective's shape and times: from its first member's event `ev` (of trace `t`), its `members`
// (rank numbers; their count sets the message size) and its measured transfer. False: the trace gives no kind
// or message size (kept as measured).
Result<bool> model_collective(const trace::RankTrace& t, const trace::Event& ev, std::vector<int> members,
                              const Topology& asked, const Topology* recorded, TopologyCollective& c) {
  if (ev.collective != trace::kNoIndex) {
    const trace::CollectiveArgs& ca = t.collectives[ev.collective];
    c.shape.kind = collective_kind(t.strings.view(ca.collective), t.name_of(ev));
    const int64_t bytes = message_bytes(t, ca, c.shape.kind, int64_t(members.size()));
    if (bytes >= 0) c.shape.bytes = bytes;
    else c.shape.kind = c.shape.kind == CollectiveKind::kBarrier ? c.shape.kind : CollectiveKind::kUnknown;
  } else {
    c.shape.kind = collective_kind("", t.name_of(ev));
    if (c.shape.kind != CollectiveKind::kBarrier) c.shape.kind = CollectiveKind::kUnknown;
  }
  if (c.shape.kind == CollectiveKind::kUnknown) return false;
  c.shape.members = std::move(members);
  std::sort(c.shape.members.begin(), c.shape.members.end());
  c.shape.kind = effective_kind(c.shape);  // reported as what it is: SendRecv kernels of 8 ranks are an all-to-all
  auto on_asked = transfer_ns(asked, c.shape);
  if (!on_asked) return on_asked.error();
  if (recorded) {
    auto on_recorded = transfer_ns(*recorded, c.shape);
    if (!on_recorded) return on_recorded.error();
    c.modeled_ns = *on_recorded;
    c.predicted_ns = c.modeled_ns > 0 ? c.measured_ns * *on_asked / c.modeled_ns : *on_asked;
  } else {
    c.modeled_ns = *on_asked;
    c.predicted_ns = *on_asked;
  }
  return true;
}

// An unmatched collective kernel (node `n`, event `ev` of `t`) against the model: nullopt where it has no kind,
// size or group that fits the topology, else whether it took less time than the modeled transfer alone.
std::optional<bool> unmatched_faster(const graph::Graph& g, NodeId n, const trace::RankTrace& t,
                                     const trace::Event& ev, const Topology& model_on) {
  if (ev.collective == trace::kNoIndex) return std::nullopt;
  const trace::CollectiveArgs& ca = t.collectives[ev.collective];
  CollectiveShape shape;
  shape.kind = collective_kind(t.strings.view(ca.collective), t.name_of(ev));
  if (shape.kind == CollectiveKind::kUnknown || ca.group_size < 1) return std::nullopt;
  shape.bytes = message_bytes(t, ca, shape.kind, ca.group_size);
  if (shape.bytes < 0) return std::nullopt;
  for (int r = 0; r < ca.group_size; ++r) shape.members.push_back(r);
  auto model = transfer_ns(model_on, shape);
  if (!model) return std::nullopt;  // the group does not fit the topology: nothing to check it by
  return double(g.meas_end_ns[n] - g.meas_start_ns[n]) < *model;
}

// The graph's durations and a report of nothing yet.
TopologyWhatIf unchanged(const graph::Graph& g, const Topology& asked, const Topology* recorded) {
  TopologyWhatIf out;
  out.dur_ns = g.dur_ns;
  out.report.file = asked.source;
  if (recorded) out.report.recorded_file = recorded->source;
  return out;
}

// Each logical collective's members in `g` (their kernels' start points lead to its start point, in the
// order of the edges), and whether each node is a member of one.
std::pair<std::vector<std::vector<NodeId>>, std::vector<char>> members_of(const graph::Graph& g) {
  std::vector<std::vector<NodeId>> members(g.num_nodes());
  std::vector<char> matched(g.num_nodes(), 0);
  for (const auto& e : g.edges) {
    if (e.kind != graph::EdgeKind::kCollective || graph::is_end(e.src)) continue;
    members[graph::node_of(e.dst)].push_back(graph::node_of(e.src));
    matched[graph::node_of(e.src)] = 1;
  }
  return {std::move(members), std::move(matched)};
}

// The report's figures over its collectives (in the step's node order).
void finish_report(TopologyReport& r, const Topology& model_on) {
  std::vector<double> errors;
  for (const TopologyCollective& c : r.collectives) {
    if (c.measured_ns > 0) errors.push_back(100.0 * std::abs(c.modeled_ns - c.measured_ns) / c.measured_ns);
  }
  r.fitted = fit_links(r.collectives, model_on);
  r.median_error_pct = median_of(errors);
  r.worst_error_pct = errors.empty() ? 0.0 : *std::max_element(errors.begin(), errors.end());
}

}  // namespace

Result<TopologyWhatIf> topology_durations(const Workload& w, const Topology& asked, const Topology* recorded) {
  const graph::Graph& g = w.graph;
  TopologyWhatIf out = unchanged(g, asked, recorded);
  auto [members, matched] = members_of(g);
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (g.kind[n] == NodeKind::kCommKernel && !matched[n]) ++out.report.unmatched;
    if (g.kind[n] != NodeKind::kCollective || members[n].empty()) continue;
    const NodeId first = members[n].front();
    const trace::RankTrace& t = w.ranks[g.rank[first]];
    TopologyCollective c;
    c.node = n;
    c.measured_ns = double(g.dur_ns[n]);
    std::vector<int> ranks;
    for (NodeId m : members[n]) ranks.push_back(g.rank_id(graph::RankIndex(g.rank[m])));
    auto modeled = model_collective(t, t.events[g.event[first]], std::move(ranks), asked, recorded, c);
    if (!modeled) return modeled.error();
    if (!*modeled) {
      ++out.report.without_size;
      continue;
    }
    out.dur_ns[n] = std::llround(c.predicted_ns);
    out.report.collectives.push_back(std::move(c));
  }
  // Unmatched collective kernels: their whole time bounds the transfer from above.
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (g.kind[n] != NodeKind::kCommKernel || matched[n] || g.event[n] == graph::kNoId) continue;
    const trace::RankTrace& t = w.ranks[g.rank[n]];
    const auto faster = unmatched_faster(g, n, t, t.events[g.event[n]], recorded ? *recorded : asked);
    if (!faster) continue;
    ++out.report.unmatched_modeled;
    out.report.unmatched_faster_than_model += *faster;
  }
  finish_report(out.report, recorded ? *recorded : asked);
  return out;
}

namespace {

// The ranks of a process's collective kernels whose collectives other processes hold; then what each
// process found, to process 0; then process 0's verdict (the first collective that fails the model), to every process.
constexpr int kTagMemberRanks = 19, kTagTopologyFacts = 25, kTagTopologyError = 26;

Error error_of(const json& j) {
  return make_error(j.at(0).get<std::string>(), j.at(1).get<std::string>(), j.at(2).get<std::string>());
}

}  // namespace

Result<TopologyWhatIf> detail::topology_durations_part(const WorkloadPart& w, const Topology& asked,
                                                       const Topology* recorded, dist::Comm& comm) {
  const graph::GraphPart& part = w.part;
  const graph::Graph& g = part.graph;
  TopologyWhatIf out = unchanged(g, asked, recorded);
  // Members here (in the order one process sees them: the first member is always here), and each kernel's
  // rank sent to the process that holds its collective.
  auto [members, matched] = members_of(g);
  // Only processes that share a collective exchange: a member's edge to its collective's start on one side,
  // the collective's edge from it on the other (the build keeps or drops both).
  std::vector<std::vector<int64_t>> to(size_t(comm.size()));
  std::set<int> from;
  for (const graph::RemoteEdge& e : part.remote) {
    if (e.kind != graph::EdgeKind::kCollective || graph::is_end(e.local)) continue;
    if (e.into_local) {
      from.insert(e.process);
      continue;
    }
    const NodeId n = graph::node_of(e.local);
    matched[n] = 1;
    to[size_t(e.process)].insert(to[size_t(e.process)].end(),
                                 {int64_t(graph::node_of(e.other)), int64_t(g.rank_id(graph::RankIndex(g.rank[n])))});
  }
  for (int q = 0; q < comm.size(); ++q) {
    if (!to[size_t(q)].empty()) EMO_RETURN_IF_ERROR(comm.send(q, kTagMemberRanks, dist::to_bytes(to[size_t(q)])));
  }
  std::unordered_map<NodeId, NodeId> local_of;
  for (NodeId n = 0; n < part.global.size(); ++n) local_of.emplace(part.global[n], n);
  std::vector<std::vector<int>> remote_ranks(g.num_nodes());
  for (int q : from) {
    auto m = comm.recv(q, kTagMemberRanks, dist::timeout_s());
    if (!m) return m.error();
    auto v = dist::from_bytes(*m, q);
    if (!v) return v.error();
    for (size_t i = 0; i + 1 < v->size(); i += 2) {
      auto it = local_of.find(NodeId((*v)[i]));
      if (it == local_of.end()) return make_error("", fmt::format("process {} named a collective this process does not hold", q));
      remote_ranks[it->second].push_back(int(v->at(i + 1)));
    }
  }
  EMO_RETURN_IF_ERROR(comm.flush(dist::timeout_s()));
  // This process's collectives, modeled; the first (in the step's node order) that the model fails.
  json facts{{"collectives", json::array()}, {"error", nullptr}};
  int64_t first_error = -1;
  TopologyReport& rep = out.report;
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (g.kind[n] == NodeKind::kCommKernel && !matched[n]) ++rep.unmatched;
    if (g.kind[n] != NodeKind::kCollective || members[n].empty()) continue;
    const NodeId first = members[n].front();
    const trace::RankTrace& t = w.ranks[g.rank[first]];
    TopologyCollective c;
    c.node = part.global[n];
    c.measured_ns = double(g.dur_ns[n]);
    std::vector<int> ranks = std::move(remote_ranks[n]);
    for (NodeId m : members[n]) ranks.push_back(g.rank_id(graph::RankIndex(g.rank[m])));
    auto modeled = model_collective(t, t.events[g.event[first]], std::move(ranks), asked, recorded, c);
    if (!modeled) {
      // Collectives are numbered after every rank's nodes, in the matching's order: the first failing here
      // is this process's first in the step's order.
      first_error = int64_t(c.node);
      const Error& e = modeled.error();
      facts["error"] = json{e.where, e.what, e.note};
      break;
    }
    if (!*modeled) {
      ++rep.without_size;
      continue;
    }
    out.dur_ns[n] = std::llround(c.predicted_ns);
    facts["collectives"].push_back(json{c.node, int(c.shape.kind), c.shape.bytes, c.shape.members, c.measured_ns,
                                        c.modeled_ns, c.predicted_ns});
    rep.collectives.push_back(std::move(c));
  }
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (g.kind[n] != NodeKind::kCommKernel || matched[n] || g.event[n] == graph::kNoId) continue;
    const trace::RankTrace& t = w.ranks[g.rank[n]];
    const auto faster = unmatched_faster(g, n, t, t.events[g.event[n]], recorded ? *recorded : asked);
    if (!faster) continue;
    ++rep.unmatched_modeled;
    rep.unmatched_faster_than_model += *faster;
  }
  // Process 0 joins the collectives in the step's order; the first error anywhere is every process's.
  std::optional<Error> error;
  if (!comm.is_root()) {
    facts["without_size"] = rep.without_size;
    facts["unmatched"] = rep.unmatched;
    facts["unmatched_modeled"] = rep.unmatched_modeled;
    facts["faster"] = rep.unmatched_faster_than_model;
    facts["error_node"] = first_error;
    const std::vector<uint8_t> bytes = json::to_cbor(facts);
    EMO_RETURN_IF_ERROR(comm.send(dist::kRoot, kTagTopologyFacts, std::string(bytes.begin(), bytes.end())));
    EMO_RETURN_IF_ERROR(comm.flush(dist::timeout_s()));
  } else {
    if (first_error >= 0) error = error_of(facts["error"]);
    for (int q = 1; q < comm.size(); ++q) {
      auto m = comm.recv(q, kTagTopologyFacts, dist::timeout_s());
      if (!m) return make_error("", fmt::format("the topology's collectives of process {}: {}", q, m.error().message()));
      try {
        const json theirs = json::from_cbor(*m);
        rep.without_size += theirs.at("without_size").get<int64_t>();
        rep.unmatched += theirs.at("unmatched").get<int64_t>();
        rep.unmatched_modeled += theirs.at("unmatched_modeled").get<int64_t>();
        rep.unmatched_faster_than_model += theirs.at("faster").get<int64_t>();
        for (const json& r : theirs.at("collectives")) {
          TopologyCollective c;
          c.node = r.at(0).get<uint32_t>();
          c.shape.kind = CollectiveKind(r.at(1).get<int>());
          c.shape.bytes = r.at(2).get<int64_t>();
          c.shape.members = r.at(3).get<std::vector<int>>();
          c.measured_ns = r.at(4).get<double>();
          c.modeled_ns = r.at(5).get<double>();
          c.predicted_ns = r.at(6).get<double>();
          rep.collectives.push_back(std::move(c));
        }
        if (!theirs.at("error").is_null()) {
          // The first collective that fails, wherever it lies (its node id orders them).
          const int64_t at = theirs.at("error_node").get<int64_t>();
          if (first_error < 0 || at < first_error) {
            first_error = at;
            error = error_of(theirs.at("error"));
          }
        }
      } catch (const json::exception& e) {
        return make_error("", fmt::format("the topology's collectives of process {} are corrupt ({})", q, e.what()),
                          "run the same emo binary on every process");
      }
    }
  }
  // Process 0's verdict, to every process: the same error everywhere.
  std::string verdict;
  if (comm.is_root() && error) verdict = dist::frame({"E", error->where, error->what, error->note});
  auto verdicts = dist::all_gather(comm, kTagTopologyError, verdict);
  if (!verdicts) return verdicts.error();
  if (!verdicts->at(dist::kRoot).empty()) {
    auto f = dist::unframe(verdicts->at(dist::kRoot));
    if (!f || f->size() != 4) return make_error("", "the topology's verdict arrived cut short");
    return make_error(std::string((*f)[1]), std::string((*f)[2]), std::string((*f)[3]));
  }
  if (comm.is_root()) {
    std::sort(rep.collectives.begin(), rep.collectives.end(),
              [](const TopologyCollective& a, const TopologyCollective& b) { return a.node < b.node; });
    finish_report(rep, recorded ? *recorded : asked);
  }
  return out;
}

json to_json(const TopologyReport& r) {
  struct Sum {
    int64_t count = 0, bytes = 0;
    double measured = 0, modeled = 0, predicted = 0;
  };
  std::map<std::string, Sum> by_kind;
  for (const auto& c : r.collectives) {
    Sum& s = by_kind[to_string(c.shape.kind)];
    ++s.count;
    s.bytes += c.shape.bytes;
    s.measured += c.measured_ns;
    s.modeled += c.modeled_ns;
    s.predicted += c.predicted_ns;
  }
  json fitted = json::array();
  for (const auto& f : r.fitted) {
    fitted.push_back({{"link", f.link}, {"collectives", f.collectives}, {"bandwidth_gb_s", f.fitted.bandwidth_gb_s},
                      {"latency_us", f.fitted.latency_us}, {"base_latency_us", f.base_latency_us},
                      {"median_error_pct", f.median_error_pct}});
  }
  // Each collective, the first kMaxListed: what a user checks the model against.
  constexpr size_t kMaxListed = 1000;
  json listed = json::array();
  for (size_t i = 0; i < r.collectives.size() && i < kMaxListed; ++i) {
    const TopologyCollective& c = r.collectives[i];
    listed.push_back({{"kind", to_string(c.shape.kind)}, {"bytes", c.shape.bytes}, {"members", c.shape.members.size()},
                      {"measured_transfer_us", c.measured_ns / 1e3}, {"modeled_transfer_us", c.modeled_ns / 1e3},
                      {"predicted_transfer_us", c.predicted_ns / 1e3}});
  }
  json kinds = json::array();
  for (const auto& [k, s] : by_kind) {
    kinds.push_back({{"kind", k}, {"count", s.count}, {"bytes", s.bytes}, {"measured_transfer_us", s.measured / 1e3},
                     {"modeled_transfer_us", s.modeled / 1e3}, {"predicted_transfer_us", s.predicted / 1e3}});
  }
  return json{{"file", r.file},
              {"recorded_file", r.recorded_file.empty() ? json(nullptr) : json(r.recorded_file)},
              {"transfers", r.recorded_file.empty() ? "modeled" : "measured_scaled"},
              {"collectives_modeled", r.collectives.size()},
              {"collectives_without_size", r.without_size},
              {"collective_kernels_unmatched", r.unmatched},
              {"median_error_pct", r.median_error_pct},
              {"worst_error_pct", r.worst_error_pct},
              {"by_kind", kinds},
              {"collectives", listed},
              {"fitted_links", fitted},
              {"unmatched_modeled", r.unmatched_modeled},
              {"unmatched_faster_than_model", r.unmatched_faster_than_model}};
}

std::string topology_warning(const TopologyReport& r) {
  if (r.collectives.empty() && r.unmatched_faster_than_model * 2 > r.unmatched_modeled && r.unmatched_modeled > 0) {
    return fmt::format("{} of {} unmatched collective kernels took less time than topology {} gives their transfer "
                       "alone: it does not describe the machine the trace was recorded on",
                       r.unmatched_faster_than_model, r.unmatched_modeled,
                       r.recorded_file.empty() ? r.file : r.recorded_file);
  }
  if (r.collectives.empty()) {
    return fmt::format("--topology changes nothing: none of the step's collectives has a kind and a message size "
                       "matched across ranks ({} without a size, {} collective kernels unmatched), so every transfer "
                       "keeps its measured time",
                       r.without_size, r.unmatched);
  }
  if (r.median_error_pct <= kTopologyDoubtPct) return {};
  const std::string& f = r.recorded_file.empty() ? r.file : r.recorded_file;
  return fmt::format("the transfer times of topology {} are {:.0f} % off the trace's measured transfers in the median "
                     "({} collectives, worst {:.0f} %): it does not describe the machine the trace was recorded on, "
                     "and the what-if rests on it{}",
                     f, r.median_error_pct, r.collectives.size(), r.worst_error_pct,
                     r.recorded_file.empty() ? "; --recorded-topology FILE scales the measured transfers instead" : "");
}

}  // namespace emo::analysis
