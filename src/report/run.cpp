// The end-to-end run: load and analyze, pack, profile on the emulated GPU, fit, optimize, evaluate the
// policy and the baselines, and write the report folder (built as DIR.tmp.<pid>, renamed at the end).
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "emo/base/file_util.h"
#include "emo/graph/graph.h"
#include "emo/report/report.h"
#include "emo/report/views.h"

namespace emo::report {

namespace fs = std::filesystem;

synth::Options example_options() {
  synth::Options o;
  o.workload = synth::Workload::kTrainPP;
  o.ranks = 4;
  return o;
}

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Renders `view` and writes it into the folder under `name`.
Status write_view(AtomicDir& dir, session::Session& s, const View& view, const std::string& name,
                  std::vector<std::string>* files) {
  auto text = view.render(s);
  if (!text) return text.error();
  EMO_RETURN_IF_ERROR(dir.write(name, *text));
  files->push_back(name);
  return {};
}

}  // namespace

session::Options session_options(const RunOptions& o) {
  session::Options so;
  so.traces = o.traces;
  so.device = o.device;
  so.profile_on = o.profile_on;
  so.profiled_dir = o.profiled_dir;
  so.optimize.max_slowdown = o.max_slowdown;
  so.optimize.reserve = o.reserve;
  so.check = o.check;
  so.refine_profile = o.refine_profile;
  so.eval_steps = o.eval_steps;
  so.progress = o.progress;
  so.load.deprofile = o.deprofile;
  return so;
}

Result<RunResult> run(const RunOptions& o) {
  const auto t_all = std::chrono::steady_clock::now();
  if (o.out_dir.empty()) return make_error("-o", "the report folder name is empty");
  EMO_RETURN_IF_ERROR(session::validate(session_options(o)));
  AtomicDir tmp;
  EMO_RETURN_IF_ERROR(tmp.open(o.out_dir, "report folder"));
  RunInfo info;
  std::vector<std::string> files;

  // ---- inputs ----
  std::vector<std::string> traces = o.traces;
  info.inputs = o.traces;  // as they will be named once the folder is in place
  if (traces.empty()) {
    auto t0 = std::chrono::steady_clock::now();
    if (o.progress) {
      o.progress(fmt::format("synthesizing the built-in example ({} ranks, {})", o.example.ranks,
                             synth::workload_name(o.example.workload)));
    }
    EMO_RETURN_IF_ERROR(synth::write_traces(o.example, (fs::path(tmp.tmp_path()) / "input").string(), &traces));
    for (const auto& t : traces) info.inputs.push_back((fs::path(tmp.final_path()) / "input" / fs::path(t).filename()).string());
    info.extra_stage_ms["synth"] = ms_since(t0);
  }
  session::Options so = session_options(o);
  // The built-in example is written here, by this process alone: it reads it alone.
  if (o.traces.empty()) so.comm = &dist::self();
  so.traces = traces;
  auto opened = session::Session::open(std::move(so));  // the devices, opened once
  if (!opened) return opened.error();
  session::Session& s = *opened;
  if (!o.accept_doubt) EMO_RETURN_IF_ERROR(refuse_doubtful_step(s));

  // ---- the stages, then the views ----
  auto ev = s.evaluation();
  if (!ev) return ev.error();
  EMO_RETURN_IF_ERROR(write_view(tmp, s, *policy_file(), "policy.json", &files));
  const auto t0 = std::chrono::steady_clock::now();
  if (o.progress) o.progress("writing the report");
  EMO_RETURN_IF_ERROR(write_view(tmp, s, *packs_csv(true), "packs.csv", &files));
  EMO_RETURN_IF_ERROR(write_view(tmp, s, *results_csv(), "results.csv", &files));
  const analysis::Workload& w = **s.workload();
  for (uint32_t r = 0; r < w.ranks.size(); ++r) {
    const std::string name = r == 0 ? "overlay.json" : fmt::format("overlay_rank{}.json", w.graph.rank_ids[r]);
    EMO_RETURN_IF_ERROR(write_view(tmp, s, *overlay(r), name, &files));
  }
  info.extra_stage_ms["views"] = ms_since(t0);
  info.extra_stage_ms["total"] = ms_since(t_all);
  EMO_RETURN_IF_ERROR(write_view(tmp, s, *report_html(info), "report.html", &files));
  auto sm = summary_document(s, info);
  if (!sm) return sm.error();
  RunResult res;
  res.summary = {{"summary", std::move(*sm)}};
  EMO_RETURN_IF_ERROR(tmp.write("summary.json", res.summary.dump(1) + "\n"));
  files.push_back("summary.json");

  // ---- put the folder in place: the old one goes only once the new one is complete ----
  EMO_RETURN_IF_ERROR(tmp.commit());
  res.out_dir = tmp.final_path();
  res.files = files;
  res.plans = **ev;
  return res;
}

}  // namespace emo::report
