// emo._emo: the bindings under the Python package (python/emo/). They hold no pipeline logic: each call
// drives a session::Session (include/emo/session/session.h) or report::run, as the CLI's subcommands do,
// and hands back the views' JSON documents as Python objects, or column arrays (numpy) from which the
// package builds DataFrames. Every long call releases the GIL; a session runs one call at a time.
// Errors become emo.Error subclasses (python/emo/_errors.py builds them from where / what / note).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emo/analysis/analysis.h"
#include "emo/analysis/deprofile.h"
#include "emo/backends/apply.h"
#include "emo/base/file_util.h"
#include "emo/base/result.h"
#include "emo/device/nvml.h"
#include "emo/optimize/optimize.h"
#include "emo/pack/pack.h"
#include "emo/report/report.h"
#include "emo/report/views.h"
#include "emo/runtime/clockd.h"
#include "emo/runtime/runtime.h"
#include "emo/session/session.h"
#include "emo/synth/synth.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using nlohmann::json;

// ---- errors -------------------------------------------------------------------------------------

// Raises the emo.Error subclass that python/emo/_errors.py picks for `e`; `opening` says that it came
// from opening the devices (Session::open past its option checks). Needs the GIL.
[[noreturn]] void raise(const emo::Error& e, bool opening = false) {
  nb::object exc;
  try {
    exc = nb::module_::import_("emo._errors").attr("_from_core")(e.where, e.what, e.note, opening);
  } catch (nb::python_error&) {
    throw std::runtime_error(e.message());  // the bindings alone, without the package
  }
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  throw nb::python_error();
}

template <class T>
T take(emo::Result<T>&& r) {
  if (!r.ok()) raise(r.error());
  return std::move(r).value();
}

void check(const emo::Status& s) {
  if (!s.ok()) raise(s.error());
}

// ---- progress -----------------------------------------------------------------------------------

// A Python callable that gets one line per stage (Options::progress). The stages run without the GIL;
// each line takes it for the call. An exception in the callable is kept and raised once the call that
// ran the stages returns.
struct Progress {
  nb::object fn;
  std::optional<nb::python_error> error;
};

std::function<void(const std::string&)> hook(const std::shared_ptr<Progress>& p) {
  if (!p || !p->fn.is_valid() || p->fn.is_none()) return {};
  return [p](const std::string& line) {
    nb::gil_scoped_acquire gil;
    if (p->error) return;
    try {
      p->fn(line);
    } catch (nb::python_error& e) {
      p->error.emplace(std::move(e));
    }
  };
}

void rethrow(Progress& p) {
  if (!p.error) return;
  nb::python_error e = std::move(*p.error);
  p.error.reset();
  throw e;
}

// ---- JSON and columns ---------------------------------------------------------------------------

// A JSON document as Python objects, as json.loads reads the CLI's file (NaN and infinities, which
// the files write as null, become None).
nb::object to_py(const json& j) {
  switch (j.type()) {
    case json::value_t::null: return nb::none();
    case json::value_t::boolean: return nb::bool_(j.get<bool>());
    case json::value_t::number_integer: return nb::int_(j.get<int64_t>());
    case json::value_t::number_unsigned: return nb::int_(j.get<uint64_t>());
    case json::value_t::number_float: {
      const double v = j.get<double>();
      return std::isfinite(v) ? nb::object(nb::float_(v)) : nb::none();
    }
    case json::value_t::string: {
      const auto& s = j.get_ref<const std::string&>();
      return nb::str(s.data(), s.size());
    }
    case json::value_t::array: {
      nb::list l;
      for (const json& e : j) l.append(to_py(e));
      return l;
    }
    case json::value_t::object: {
      nb::dict d;
      for (auto it = j.begin(); it != j.end(); ++it) d[nb::str(it.key().data(), it.key().size())] = to_py(it.value());
      return d;
    }
    default: return nb::none();
  }
}

// A column: a numpy array that owns its vector.
template <class T>
nb::object column(std::vector<T>&& v) {
  auto* heap = new std::vector<T>(std::move(v));
  nb::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  const size_t n = heap->size();
  return nb::cast(nb::ndarray<nb::numpy, T, nb::ndim<1>>(heap->data(), {n}, owner));
}

// A bool column, kept as bytes in C++.
nb::object bool_column(std::vector<uint8_t>&& v) {
  auto* heap = new std::vector<uint8_t>(std::move(v));
  nb::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<uint8_t>*>(p); });
  const size_t n = heap->size();
  return nb::cast(nb::ndarray<nb::numpy, bool, nb::ndim<1>>(reinterpret_cast<bool*>(heap->data()), {n}, owner));
}

// A text column as categorical codes into its distinct values (pandas.Categorical.from_codes).
struct Categories {
  std::vector<int32_t> codes;
  std::vector<std::string> values;
  std::unordered_map<std::string, int32_t> index;
  void add(std::string_view s) {
    auto [it, fresh] = index.try_emplace(std::string(s), static_cast<int32_t>(values.size()));
    if (fresh) values.emplace_back(s);
    codes.push_back(it->second);
  }
};

// Columns as C++ builds them without the GIL, turned into a dict of numpy arrays with it.
struct Columns {
  // deques: the references that f(), i(), b() and t() hand out stay valid as columns are added.
  std::deque<std::pair<std::string, std::vector<double>>> f64;
  std::deque<std::pair<std::string, std::vector<int64_t>>> i64;
  std::deque<std::pair<std::string, std::vector<uint8_t>>> flags;
  std::deque<std::pair<std::string, Categories>> text;
  std::vector<std::string> order;

  std::vector<double>& f(const std::string& name) { order.push_back(name); return f64.emplace_back(name, std::vector<double>{}).second; }
  std::vector<int64_t>& i(const std::string& name) { order.push_back(name); return i64.emplace_back(name, std::vector<int64_t>{}).second; }
  std::vector<uint8_t>& b(const std::string& name) { order.push_back(name); return flags.emplace_back(name, std::vector<uint8_t>{}).second; }
  Categories& t(const std::string& name) { order.push_back(name); return text.emplace_back(name, Categories{}).second; }

  // {"columns": [names in order], "data": {name: array or (codes, categories)}}.
  nb::dict to_py() && {
    nb::dict data;
    for (auto& [k, v] : f64) data[k.c_str()] = column(std::move(v));
    for (auto& [k, v] : i64) data[k.c_str()] = column(std::move(v));
    for (auto& [k, v] : flags) data[k.c_str()] = bool_column(std::move(v));
    for (auto& [k, v] : text) data[k.c_str()] = nb::make_tuple(column(std::move(v.codes)), nb::cast(v.values));
    nb::list names;
    for (const auto& k : order) names.append(nb::str(k.c_str()));
    nb::dict out;
    out["columns"] = names;
    out["data"] = data;
    return out;
  }
};

double us(int64_t ns) { return static_cast<double>(ns) / 1000.0; }
double round3(double v) { return std::round(v * 1000.0) / 1000.0; }

// ---- the session --------------------------------------------------------------------------------

struct OpenArgs {
  std::vector<std::string> traces;
  std::optional<int64_t> step;
  std::string device = "h100";
  std::string profile_on, profiled_dir, policy_file;
  double max_slowdown = 0.05, reserve = 0.1;
  bool check = true;
  bool refine_profile = true;
  int eval_steps = 12;
  bool split_collectives = true;
  bool cpu_ops_as_kernels = false;
  bool deprofile = false;
  double min_pack = 1.0;
  std::optional<double> min_pack_ms;
  double critical_slack_us = 50;
  int profile_clocks = 4;
  bool per_kernel = false;
};

// The session's options from the Python arguments; the range checks the CLI's flags make
// (tools/emo/session_flags.cpp, cli_common.cpp), with the same messages.
emo::Result<emo::session::Options> options_of(const OpenArgs& a) {
  emo::session::Options o;
  o.traces = a.traces;
  if (a.step && *a.step < 0)
    return emo::make_error("--step", "must be a ProfilerStep number, 0 or more", "leave it out for the last complete step");
  o.load.step = a.step;
  o.load.build.split_collectives = a.split_collectives;
  o.load.cpu_ops_as_kernels = a.cpu_ops_as_kernels;
  o.load.deprofile = a.deprofile;
  o.device = a.device;
  o.profile_on = a.profile_on;
  o.profiled_dir = a.profiled_dir;
  o.policy_file = a.policy_file;
  o.optimize.max_slowdown = a.max_slowdown;
  o.optimize.reserve = a.reserve;
  o.check = a.check;
  o.refine_profile = a.refine_profile;
  o.eval_steps = a.eval_steps;
  o.pack.min_switch_multiple = a.min_pack;
  if (a.min_pack_ms) {
    if (!(*a.min_pack_ms >= 0 && *a.min_pack_ms <= 1e9))
      return emo::make_error("--min-pack-ms", "must be a number of milliseconds from 0 to 1e9");
    o.pack.min_pack_ns = static_cast<int64_t>(*a.min_pack_ms * 1e6);
  }
  if (!(a.critical_slack_us >= 0 && a.critical_slack_us <= 1e9))
    return emo::make_error("--critical-slack-us", "must be a number of microseconds from 0 to 1e9");
  o.pack.critical_slack_ns = static_cast<int64_t>(a.critical_slack_us * 1e3);
  o.pack.profile_clocks = a.profile_clocks;
  o.pack.per_kernel = a.per_kernel;
  return o;
}

class PySession {
 public:
  PySession(emo::session::Session s, std::shared_ptr<Progress> p) : s_(std::move(s)), progress_(std::move(p)) {}

  // Runs f(session) without the GIL, one call at a time per session; raises what the progress
  // callable raised, then returns f's result.
  template <class F>
  auto call(F&& f) {
    using R = decltype(f(*s_));
    std::optional<R> r;
    {
      nb::gil_scoped_release nogil;
      std::lock_guard<std::mutex> lock(mu_);
      r.emplace(f(*s_));
    }
    rethrow(*progress_);
    return std::move(*r);
  }

  std::string device() const { return s_->options().device; }
  std::string profile_name() const { return s_->profile().name; }
  int default_clock_mhz() const { return s_->default_clock_mhz(); }
  std::vector<std::string> traces() const { return s_->options().traces; }
  bool emulated() const { return s_->target().emulated(); }

 private:
  std::optional<emo::session::Session> s_;
  std::shared_ptr<Progress> progress_;
  std::mutex mu_;
};

struct Opened {
  emo::session::Session session;
  std::shared_ptr<Progress> progress;
};

Opened open_session(const OpenArgs& a, nb::object progress) {
  auto p = std::make_shared<Progress>();
  p->fn = std::move(progress);
  auto o = options_of(a);
  if (!o.ok()) raise(o.error());
  o->progress = hook(p);
  check(emo::session::validate(*o));
  std::optional<emo::Result<emo::session::Session>> s;
  {
    nb::gil_scoped_release nogil;
    s.emplace(emo::session::Session::open(std::move(*o)));
  }
  rethrow(*p);
  if (!s->ok()) raise(s->error(), true);  // options were valid: opening a device failed
  return Opened{std::move(*s).value(), std::move(p)};
}

// Every GPU op in node order (the order of `emo analyze --per-kernel`'s kernels): its rank, its index
// in the rank's index order (pack::gpu_ops_in_index_order, the policy file's `index`), and whether the
// extracted critical path runs through it.
emo::Result<Columns> kernel_columns(emo::session::Session& s) {
  auto an = s.analysis();
  if (!an) return an.error();
  const emo::analysis::Workload& w = **s.workload();
  const emo::analysis::Analysis& a = **an;
  const emo::graph::Graph& g = w.graph;
  const int64_t begin = g.measured_begin_ns();
  std::vector<int64_t> index_of(g.num_nodes(), -1);
  for (const auto& ops : emo::pack::gpu_ops_in_index_order(g)) {
    for (size_t k = 0; k < ops.size(); ++k) index_of[ops[k]] = static_cast<int64_t>(k);
  }
  std::vector<uint8_t> on_path(g.num_nodes(), 0);
  for (emo::graph::NodeId n : a.critical_path.nodes) {
    if (n < g.num_nodes()) on_path[n] = 1;
  }
  Columns c;
  auto& rank = c.i("rank");
  auto& index = c.i("index");
  auto& name = c.t("name");
  auto& stream = c.i("stream");
  auto& start = c.f("start_us");
  auto& dur = c.f("dur_us");
  auto& slack = c.f("slack_us");
  auto& critical = c.b("on_critical_path");
  auto& kind = c.t("kind");
  auto& node = c.i("node");
  for (emo::graph::NodeId n = 0; n < g.num_nodes(); ++n) {
    if (!emo::graph::is_gpu(g.kind[n])) continue;
    rank.push_back(g.rank_ids[g.rank[n]]);
    index.push_back(index_of[n]);
    name.add(g.strings.view(g.name[n]));
    stream.push_back(g.lanes[g.lane[n]].stream);
    start.push_back(round3(us(g.meas_start_ns[n] - begin)));
    dur.push_back(round3(us(g.meas_end_ns[n] - g.meas_start_ns[n])));
    slack.push_back(round3(us(a.slack_ns[n])));
    critical.push_back(on_path[n]);
    kind.add(emo::graph::to_string(g.kind[n]));
    node.push_back(n);
  }
  return c;
}

// The critical path piece by piece (as `emo analyze --critical-path-csv` writes it).
emo::Result<Columns> path_columns(emo::session::Session& s) {
  auto an = s.analysis();
  if (!an) return an.error();
  const emo::graph::Graph& g = (*s.workload())->graph;
  const int64_t begin = g.measured_begin_ns();
  Columns c;
  auto& segment = c.t("segment");
  auto& kind = c.t("kind");
  auto& rank = c.i("rank");
  auto& name = c.t("name");
  auto& start = c.f("start_us");
  auto& dur = c.f("dur_us");
  auto& node = c.i("node");
  auto& from = c.i("from_node");
  for (const auto& seg : (*an)->critical_path.segments) {
    const emo::graph::NodeId n = seg.is_edge ? seg.from : seg.node;
    std::string text(g.strings.view(g.name[n]));
    if (seg.is_edge) text += " -> " + std::string(g.strings.view(g.name[seg.node]));
    segment.add(seg.is_edge ? "edge" : "node");
    kind.add(seg.is_edge ? emo::graph::to_string(seg.edge) : emo::graph::to_string(g.kind[n]));
    rank.push_back(g.rank_ids[g.rank[n]]);
    name.add(text);
    start.push_back(us(seg.start_ns - begin));
    dur.push_back(us(seg.ns));
    node.push_back(seg.node);
    from.push_back(seg.is_edge ? static_cast<int64_t>(seg.from) : -1);
  }
  return c;
}

// One row per pack (packs.csv, and `emo pack --json --all`'s packs), with the policy's clock when
// `with_clocks` (which runs the optimizer).
emo::Result<Columns> pack_columns(emo::session::Session& s, bool with_clocks) {
  auto p = s.packing();
  if (!p) return p.error();
  const std::vector<int>* clocks = nullptr;
  if (with_clocks) {
    auto sol = s.solution();
    if (!sol) return sol.error();
    clocks = &(*sol)->solution.policy.pack_clock_mhz;
  }
  const emo::graph::Graph& g = (*s.workload())->graph;
  Columns c;
  auto& pack = c.i("pack");
  auto& rank = c.i("rank");
  auto& begin = c.f("begin_us");
  auto& end = c.f("end_us");
  auto& busy = c.f("busy_us");
  auto& slack = c.t("slack_class");
  auto& bound = c.t("boundness");
  auto& first = c.i("first_op");
  auto& last = c.i("last_op");
  auto& kernels = c.i("kernels");
  auto& atoms = c.i("atoms");
  auto& first_name = c.t("first_name");
  auto& signature = c.t("signature");
  std::vector<int64_t>* clock = clocks ? &c.i("clock_mhz") : nullptr;
  for (size_t k = 0; k < (*p)->packs.size(); ++k) {
    const emo::pack::Pack& pk = (*p)->packs[k];
    const emo::pack::GpuOps& go = (*p)->gpus[pk.rank.index()];
    const bool has_ops = pk.first_op <= pk.last_op;
    pack.push_back(static_cast<int64_t>(k));
    rank.push_back(g.rank_id(go.rank));
    begin.push_back(static_cast<double>(pk.begin_ns) / 1e3);
    end.push_back(static_cast<double>(pk.end_ns) / 1e3);
    busy.push_back(static_cast<double>(pk.busy_ns) / 1e3);
    slack.add(emo::pack::to_string(pk.slack));
    bound.add(emo::pack::to_string(pk.bound));
    first.push_back(has_ops ? static_cast<int64_t>(pk.first_op) : int64_t{-1});
    last.push_back(has_ops ? static_cast<int64_t>(pk.last_op) : int64_t{-1});
    kernels.push_back(has_ops ? pk.last_op - pk.first_op + 1 : 0);
    atoms.push_back(pk.last_atom - pk.first_atom + 1);
    first_name.add(has_ops ? g.strings.view(g.name[go.ops[pk.first_op]]) : std::string_view());
    signature.add(fmt::format("{:016x}", pk.signature));
    if (clock) clock->push_back(k < clocks->size() ? (*clocks)[k] : 0);
  }
  return c;
}

// Each plan of the evaluation (results.csv's columns).
emo::Result<Columns> evaluation_columns(emo::session::Session& s) {
  auto ev = s.evaluation();
  if (!ev) return ev.error();
  Columns c;
  auto& name = c.t("name");
  auto& time = c.f("time_us");
  auto& energy = c.f("energy_j");
  auto& saving = c.f("saving_pct");
  auto& slowdown = c.f("slowdown_pct");
  auto& predicted = c.b("predicted");
  auto& ptime = c.f("predicted_time_us");
  auto& penergy = c.f("predicted_energy_j");
  auto& steps = c.i("steps");
  for (const emo::session::EvaluatedPlan& r : **ev) {
    name.add(r.name);
    time.push_back(r.measured.mean_step_ns() / 1e3);
    energy.push_back(r.measured.energy_j);
    saving.push_back(r.saving_pct);
    slowdown.push_back(r.slowdown_pct);
    predicted.push_back(r.predicted ? 1 : 0);
    constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
    ptime.push_back(r.predicted ? static_cast<double>(r.predicted_time_ns) / 1e3 : kNone);
    penergy.push_back(r.predicted ? r.predicted_energy_j : kNone);
    steps.push_back(static_cast<int64_t>(r.measured.step_ns.size()));
  }
  return c;
}

// `emo apply`'s run and document (report::apply_document, as the CLI writes it); the caller adds "policy".
emo::Result<json> apply_document(emo::session::Session& s, const emo::backends::ApplyOptions& ao, bool evaluate) {
  auto d = emo::report::apply_document(s, ao, evaluate);
  if (!d) return d.error();
  return json{{"document", std::move(d->document)}, {"warnings", std::move(d->warnings)}};
}

// A JSON document (always an object) as a dict.
template <class F>
nb::dict json_call(PySession& self, F&& f) {
  auto r = self.call(std::forward<F>(f));
  return nb::borrow<nb::dict>(to_py(take(std::move(r))));
}

template <class F>
nb::dict columns_call(PySession& self, F&& f) {
  auto r = self.call(std::forward<F>(f));
  return take(std::move(r)).to_py();
}

// ---- NVML energy meter (emo.monitor) --------------------------------------------------------------

class EnergyMeter {
 public:
  explicit EnergyMeter(const std::vector<int>& indices) {
    std::optional<emo::Error> err;
    {
      nb::gil_scoped_release nogil;
      for (int i : indices) {
        auto d = emo::device::open_nvml_device(i);
        if (!d) {
          err = d.error();
          break;
        }
        devices_.push_back(std::move(*d));
        indices_.push_back(i);
      }
    }
    if (err) raise(*err);
  }
  // Seconds on a monotonic clock, and each GPU's energy counter in joules, read together.
  std::pair<double, std::vector<double>> read() {
    std::vector<double> joules;
    std::optional<emo::Error> err;
    double t = 0;
    {
      nb::gil_scoped_release nogil;
      std::lock_guard<std::mutex> lock(mu_);
      t = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
      for (auto& d : devices_) {
        auto e = d->energy_j();
        if (!e) {
          err = e.error();
          break;
        }
        joules.push_back(*e);
      }
    }
    if (err) raise(*err);
    return {t, std::move(joules)};
  }
  std::vector<int> indices() const { return indices_; }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& d : devices_) out.push_back(d->model_name());
    return out;
  }
  std::vector<std::string> profiles() const {
    std::vector<std::string> out;
    for (const auto& d : devices_) out.push_back(d->profile().name);
    return out;
  }

 private:
  std::vector<std::unique_ptr<emo::device::Device>> devices_;
  std::vector<int> indices_;
  std::mutex mu_;
};

}  // namespace

// ---- the runtime inside a job --------------------------------------------------------------------

// emo.Runtime: emo::runtime::Runtime with what it steers opened from a spec: "" (a dry run: every change
// decided and recorded, none made), "nvml:N" (NVML in this process: root) or "clockd:SOCKET#G" (the
// node's daemon). `meter` (an NVML index, -1: none) is the energy counter read beside it.
struct PyRuntime {
  std::unique_ptr<emo::device::Device> nvml_clock, nvml_meter;
  std::unique_ptr<emo::runtime::ClockControl> clock;
  std::unique_ptr<emo::runtime::Runtime> rt;
  nb::object report;  // after stop()

  void open(const std::string& policy_text, const std::string& where, int rank, const std::string& clock_spec, int meter,
            bool gpu_anchor, uintptr_t stream, bool verify, int block_steps, bool log) {
    emo::runtime::RuntimeOptions o;
    o.program = take(emo::runtime::program_from_policy(policy_text, where));
    o.rank = size_t(std::max(0, rank));
    if (rank < 0) raise(emo::make_error("rank", "must be 0 or more"));
    if (clock_spec.empty() || clock_spec == "dry-run") {
      o.dry_run = true;
    } else if (clock_spec.rfind("nvml:", 0) == 0) {
      const int idx = std::atoi(clock_spec.c_str() + 5);
      nvml_clock = take(emo::device::open_nvml_device(idx));
      clock = std::make_unique<emo::runtime::DeviceClockControl>(*nvml_clock);
      if (meter < 0) meter = idx;
    } else if (clock_spec.rfind("clockd:", 0) == 0) {
      const std::string rest = clock_spec.substr(7);
      const size_t hash = rest.rfind('#');
      const std::string socket = hash == std::string::npos ? rest : rest.substr(0, hash);
      const int gpu = hash == std::string::npos ? 0 : std::atoi(rest.c_str() + hash + 1);
      clock = take(emo::runtime::ClockdClient::connect(socket, gpu));
    } else {
      raise(emo::make_error("clock", "'" + clock_spec + "' is not a clock control",
                            "give '' (dry run), 'nvml:N' or 'clockd:SOCKET#GPU'"));
    }
    o.clock = clock.get();
    if (meter >= 0) {
      nvml_meter = take(emo::device::open_nvml_device(meter));
      emo::device::Device* d = nvml_meter.get();
      o.energy_j = [d] { return d->energy_j(); };
    }
    if (gpu_anchor) {
      o.launch = take(emo::runtime::cuda_launch_host_func()).fn;
      o.stream = reinterpret_cast<void*>(stream);
    }
    o.phases.verify = verify;
    o.phases.block_steps = block_steps;
    o.log_to_stderr = log;
    rt = take(emo::runtime::Runtime::start(std::move(o)));
  }
  emo::runtime::Runtime& live() {
    if (!rt) raise(emo::make_error("runtime", "stopped"));
    return *rt;
  }
};

NB_MODULE(_emo, m) {
  m.doc() = "EMO's C++ core (the package emo wraps it; use that)";
  m.attr("__version__") = EMO_VERSION;
  m.attr("version") = EMO_VERSION;  // (stubgen leaves dunders out of the stubs)

  nb::class_<PySession>(m, "Session", "One pipeline over one set of traces (emo::session::Session)")
      .def(
          "__init__",
          [](PySession* self, std::vector<std::string> traces, std::optional<int64_t> step, std::string device,
             std::string profile_on, std::string profiled_dir, std::string policy_file, double max_slowdown,
             double reserve, bool check, bool refine_profile, int eval_steps, bool split_collectives,
             bool cpu_ops_as_kernels, double min_pack, std::optional<double> min_pack_ms, double critical_slack_us,
             int profile_clocks, bool per_kernel, bool deprofile, nb::object progress) {
            OpenArgs a;
            a.traces = std::move(traces);
            a.step = step;
            a.device = std::move(device);
            a.profile_on = std::move(profile_on);
            a.profiled_dir = std::move(profiled_dir);
            a.policy_file = std::move(policy_file);
            a.max_slowdown = max_slowdown;
            a.reserve = reserve;
            a.check = check;
            a.refine_profile = refine_profile;
            a.eval_steps = eval_steps;
            a.split_collectives = split_collectives;
            a.cpu_ops_as_kernels = cpu_ops_as_kernels;
            a.min_pack = min_pack;
            a.min_pack_ms = min_pack_ms;
            a.critical_slack_us = critical_slack_us;
            a.profile_clocks = profile_clocks;
            a.per_kernel = per_kernel;
            a.deprofile = deprofile;
            Opened o = open_session(a, std::move(progress));
            new (self) PySession(std::move(o.session), std::move(o.progress));
          },
          "traces"_a, nb::kw_only(), "step"_a = nb::none(), "device"_a = "h100", "profile_on"_a = "",
          "profiled_dir"_a = "", "policy_file"_a = "", "max_slowdown"_a = 0.05, "reserve"_a = 0.1, "check"_a = true,
          "refine_profile"_a = true, "eval_steps"_a = 12, "split_collectives"_a = true, "cpu_ops_as_kernels"_a = false,
          "min_pack"_a = 1.0, "min_pack_ms"_a = nb::none(),
          "critical_slack_us"_a = 50.0, "profile_clocks"_a = 4, "per_kernel"_a = false, "deprofile"_a = false,
          "progress"_a = nb::none())
      .def_prop_ro("device", &PySession::device)
      .def_prop_ro("profile_name", &PySession::profile_name)
      .def_prop_ro("default_clock_mhz", &PySession::default_clock_mhz)
      .def_prop_ro("traces", &PySession::traces)
      .def_prop_ro("emulated", &PySession::emulated, "the device is an emulated GPU")
      .def(
          "analyze_document",
          [](PySession& self, bool per_kernel) {
            return json_call(self, [&](emo::session::Session& s) { return emo::report::analyze_document(s, per_kernel); });
          },
          "per_kernel"_a = false, "`emo analyze --json` (with --per-kernel: the kernels list)")
      .def(
          "step_warnings",
          [](PySession& self) {
            auto r = self.call([](emo::session::Session& s) -> emo::Result<std::vector<std::string>> {
              auto an = s.analysis();
              if (!an) return an.error();
              return emo::analysis::step_warnings(**s.workload(), **an);
            });
            return take(std::move(r));
          },
          "what `emo analyze` warns about on stderr")
      .def(
          "kernels", [](PySession& self) { return columns_call(self, kernel_columns); },
          "every GPU op as columns")
      .def(
          "critical_path", [](PySession& self) { return columns_call(self, path_columns); },
          "the critical path's segments as columns")
      .def(
          "whatif_document",
          [](PySession& self, const std::vector<std::string>& scales) {
            std::vector<emo::analysis::Scale> parsed;
            for (const auto& text : scales) parsed.push_back(take(emo::analysis::parse_scale(text)));
            return json_call(self, [&](emo::session::Session& s) { return emo::report::whatif_document(s, parsed); });
          },
          "scales"_a, "`emo whatif --json`")
      .def(
          "pack_document",
          [](PySession& self, bool all, int fidelity_mhz) {
            return json_call(self,
                             [&](emo::session::Session& s) { return emo::report::pack_document(s, all, fidelity_mhz); });
          },
          "all"_a = false, "fidelity_mhz"_a = 0, "`emo pack --json` (--all, --fidelity-at)")
      .def(
          "packs",
          [](PySession& self, bool with_clocks) {
            return columns_call(self, [&](emo::session::Session& s) { return pack_columns(s, with_clocks); });
          },
          "with_clocks"_a = false, "every pack as columns (with the policy's clock: runs the optimizer)")
      .def(
          "refuse_doubtful_step",
          [](PySession& self) {
            auto r = self.call([](emo::session::Session& s) -> emo::Result<bool> {
              EMO_RETURN_IF_ERROR(emo::report::refuse_doubtful_step(s));
              return true;
            });
            take(std::move(r));
          },
          "raises where `emo optimize` stops without --accept-doubt (most launches without GPU activity, a "
          "replay far from the trace, a step mostly blocked on GPU work the trace does not record)")
      .def(
          "optimize_document",
          [](PySession& self) { return json_call(self, emo::report::optimize_document); }, "`emo optimize --json`")
      .def(
          "policy_text",
          [](PySession& self) {
            auto r = self.call([](emo::session::Session& s) { return emo::report::policy_file()->render(s); });
            return take(std::move(r));
          },
          "the policy file (emo-policy/1) as `emo optimize -o` writes it")
      .def(
          "evaluate_document",
          [](PySession& self) { return json_call(self, emo::report::evaluate_document); }, "`emo evaluate --json`")
      .def(
          "evaluation", [](PySession& self) { return columns_call(self, evaluation_columns); },
          "each evaluated plan as columns")
      .def(
          "run_warnings",
          [](PySession& self) {
            auto r = self.call([](emo::session::Session& s) { return emo::report::run_warnings(s); });
            return take(std::move(r));
          },
          "the doubt a run leaves (the check's warnings, the evaluation's energy gap)")
      .def(
          "apply",
          [](PySession& self, int steps, bool verify, int block_steps, uint64_t seed, bool evaluate) {
            emo::backends::ApplyOptions ao;
            ao.steps = steps;
            ao.verify = verify;
            ao.block_steps = block_steps;
            ao.seed = seed;
            return json_call(self, [&](emo::session::Session& s) { return apply_document(s, ao, evaluate); });
          },
          nb::kw_only(), "steps"_a = 0, "verify"_a = false, "block_steps"_a = 0, "seed"_a = 1, "evaluate"_a = false,
          "`emo apply --json` (without its \"policy\" key) and its warnings")
      .def(
          "stage_ms",
          [](PySession& self) {
            return self.call([](emo::session::Session& s) { return s.stage_ms(); });
          },
          "wall-clock ms of each stage run so far");

  m.def(
      "run",
      [](std::vector<std::string> traces, std::string device, double max_slowdown, double reserve,
         std::string out_dir, std::string profiled_dir, int eval_steps, bool check, bool refine_profile, bool accept_doubt,
         nb::object progress) {
        auto p = std::make_shared<Progress>();
        p->fn = std::move(progress);
        emo::report::RunOptions o;
        o.traces = std::move(traces);
        o.device = std::move(device);
        o.max_slowdown = max_slowdown;
        o.reserve = reserve;
        o.out_dir = std::move(out_dir);
        o.profiled_dir = std::move(profiled_dir);
        o.eval_steps = eval_steps;
        o.check = check;
        o.refine_profile = refine_profile;
        o.accept_doubt = accept_doubt;
        o.progress = hook(p);
        std::optional<emo::Result<emo::report::RunResult>> r;
        {
          nb::gil_scoped_release nogil;
          r.emplace(emo::report::run(o));
        }
        o.progress = nullptr;
        rethrow(*p);
        emo::report::RunResult res = take(std::move(*r));
        return nb::make_tuple(to_py(res.summary), res.out_dir, nb::cast(res.files));
      },
      "traces"_a, nb::kw_only(), "device"_a = "h100", "max_slowdown"_a = 0.05, "reserve"_a = 0.1,
      "out_dir"_a = "emo-report", "profiled_dir"_a = "", "eval_steps"_a = 12, "check"_a = true,
      "refine_profile"_a = true, "accept_doubt"_a = false, "progress"_a = nb::none(), "`emo run`: (summary.json's document, the folder, its files)");

  m.attr("profiler_slowdown_doubt_pct") = emo::analysis::kProfilerSlowdownDoubtPct;

  m.def(
      "deprofile",
      [](const std::vector<std::string>& traces, const std::string& out_dir, std::optional<int64_t> step,
         std::optional<double> host_scale, std::optional<double> untraced_step_ms, bool cpu_ops_as_kernels) {
        std::optional<emo::Result<emo::analysis::Deprofiled>> r;
        {
          nb::gil_scoped_release nogil;
          r.emplace([&]() -> emo::Result<emo::analysis::Deprofiled> {
            auto paths = emo::analysis::expand_trace_paths(traces);
            if (!paths) return paths.error();
            EMO_RETURN_IF_ERROR(emo::check_outputs(*paths, {{"out_dir", out_dir}}));
            emo::analysis::LoadOptions lo;
            lo.step = step;
            lo.cpu_ops_as_kernels = cpu_ops_as_kernels;
            auto w = emo::analysis::load(*paths, lo);
            if (!w) return w.error();
            std::optional<int64_t> untraced_ns;
            if (untraced_step_ms) {
              if (!(*untraced_step_ms > 0 && *untraced_step_ms <= 1e9))
                return emo::make_error("untraced_step_ms", "must be a step time in ms above 0");
              untraced_ns = static_cast<int64_t>(*untraced_step_ms * 1e6 + 0.5);
            }
            return emo::analysis::deprofile(*w, out_dir, host_scale, untraced_ns);
          }());
        }
        emo::analysis::Deprofiled d = take(std::move(*r));
        json j;
        j["host_scale"] = d.host_scale;
        j["replayed_ms"] = static_cast<double>(d.replayed_ns) / 1e6;
        j["files"] = d.files;
        j["warnings"] = d.warnings;
        if (d.cost) {
          j["traced_ms"] = static_cast<double>(d.cost->traced_ns) / 1e6;
          j["untraced_ms"] = static_cast<double>(d.cost->untraced_ns) / 1e6;
          j["explained"] = d.cost->explained;
        }
        return nb::borrow<nb::dict>(to_py(j));
      },
      "traces"_a, "out_dir"_a, nb::kw_only(), "step"_a = nb::none(), "host_scale"_a = nb::none(),
      "untraced_step_ms"_a = nb::none(), "cpu_ops_as_kernels"_a = false, "`emo deprofile`: what it found and the files it wrote");

  m.def(
      "expand_trace_paths",
      [](const std::vector<std::string>& paths) { return take(emo::analysis::expand_trace_paths(paths)); }, "paths"_a,
      "the trace files of `paths`: a folder stands for its .json and .json.gz files, in byte order");

  m.def(
      "synth",
      [](const std::string& workload, const std::string& out_dir, int ranks, int layers, int steps, int decode_tokens,
         int microbatches, uint64_t seed, int64_t min_events) {
        emo::synth::Options o;
        o.workload = take(emo::synth::parse_workload(workload));
        o.ranks = ranks;
        o.layers = layers;
        o.steps = steps;
        o.decode_tokens = decode_tokens;
        o.microbatches = microbatches;
        o.seed = seed;
        o.min_events = min_events;
        check(emo::synth::validate(o));
        std::vector<std::string> files;
        emo::Status st;
        {
          nb::gil_scoped_release nogil;
          st = emo::synth::write_traces(o, out_dir, &files);
        }
        check(st);
        return files;
      },
      "workload"_a, "out_dir"_a, nb::kw_only(), "ranks"_a = 2, "layers"_a = 4, "steps"_a = 3, "decode_tokens"_a = 16,
      "microbatches"_a = 8, "seed"_a = 1, "min_events"_a = 0, "`emo synth`: the files written, one per rank");

  nb::class_<PyRuntime>(m, "Runtime", "The runtime inside a job (include/emo/runtime/runtime.h): two calls per step")
      .def(
          "__init__",
          [](PyRuntime* self, const std::string& policy_text, const std::string& where, int rank, const std::string& clock,
             int meter, bool gpu_anchor, uintptr_t stream, bool verify, int block_steps, bool log) {
            new (self) PyRuntime();
            self->open(policy_text, where, rank, clock, meter, gpu_anchor, stream, verify, block_steps, log);
          },
          "policy_text"_a, "where"_a = "policy", nb::kw_only(), "rank"_a = 0, "clock"_a = "", "meter"_a = -1,
          "gpu_anchor"_a = false, "stream"_a = 0, "verify"_a = false, "block_steps"_a = 0, "log"_a = true)
      .def("step_begin", [](PyRuntime& r) { r.live().step_begin(); }, "the step starts (enqueues its anchor)")
      .def("step_end", [](PyRuntime& r) { r.live().step_end(); }, "the step's work has been enqueued")
      .def(
          "snapshot",
          [](PyRuntime& r) {
            if (!r.rt) return r.report;
            emo::runtime::RuntimeReport rep;
            {
              nb::gil_scoped_release nogil;
              rep = r.rt->snapshot();
            }
            return to_py(emo::runtime::runtime_report_json(rep, false));
          },
          "the measurement so far (emo apply's keys)")
      .def(
          "stop",
          [](PyRuntime& r) {
            if (!r.rt) return r.report;
            std::optional<emo::Result<emo::runtime::RuntimeReport>> rep;
            {
              nb::gil_scoped_release nogil;
              rep.emplace(r.rt->stop());
            }
            r.rt.reset();
            r.clock.reset();
            r.report = to_py(emo::runtime::runtime_report_json(take(std::move(*rep)), true));
            return r.report;
          },
          "stops, resets the clock; the report with every call made (or, dry run, decided)");

  nb::class_<EnergyMeter>(m, "EnergyMeter", "GPUs opened through NVML (libnvidia-ml.so.1), read together")
      .def(nb::init<const std::vector<int>&>(), "indices"_a)
      .def("read", &EnergyMeter::read, "(monotonic seconds, joules per GPU)")
      .def_prop_ro("indices", &EnergyMeter::indices)
      .def_prop_ro("names", &EnergyMeter::names)
      .def_prop_ro("profiles", &EnergyMeter::profiles);
}
