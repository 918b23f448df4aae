// report.html: one self-contained page (no network, no script needed) with five inline SVG charts drawn
// here from the run's data — time vs energy of every plan, per-GPU pack timelines colored by clock,
// the critical path's breakdown, the slack histogram of GPU ops, the profiling saving — and the tables.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "emo/graph/graph.h"
#include "emo/report/report.h"

namespace emo::report {

namespace {

std::string esc(std::string_view s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

constexpr double kW = 960;      // chart width (px)
constexpr double kLeft = 110;   // room for row labels
constexpr double kRight = 30;

// Low clocks blue, the default clock red.
std::string clock_color(int mhz, int lo, int hi) {
  const double t = hi > lo ? std::clamp(double(mhz - lo) / double(hi - lo), 0.0, 1.0) : 1.0;
  return fmt::format("hsl({:.0f},70%,50%)", 220.0 * (1 - t));
}

const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#9c755f"};

void scatter(std::string& h, const ReportData& d) {
  const double H = 360, top = 20, bottom = 50;
  double t0 = 1e300, t1 = -1e300, e0 = 1e300, e1 = -1e300;
  for (const session::EvaluatedPlan& r : d.plans) {
    const double t = r.measured.mean_step_ns() / 1e3;
    t0 = std::min(t0, t), t1 = std::max(t1, t);
    e0 = std::min(e0, r.measured.energy_j), e1 = std::max(e1, r.measured.energy_j);
  }
  if (d.plans.empty()) t0 = t1 = e0 = e1 = 0;
  // Axes that keep differences in proportion: energy from 0, time around the default's step from
  // δ below it to past the time limit (at least ±2 % of it), so a 0.03 % difference stays a hair.
  const double delta = d.summary.value("max_slowdown", 0.0);
  const double t_def = d.plans.empty() ? 0 : d.plans[0].measured.mean_step_ns() / 1e3;
  const double limit_us = t_def * (1 + delta);
  const double span = std::max(0.02, delta);
  t0 = std::min(t0, t_def * (1 - span));
  t1 = std::max({t1, limit_us + t_def * span / 4, t_def * (1 + span)});
  const double pt = std::max(1e-9, (t1 - t0) * 0.05);
  t0 -= pt, t1 += pt;
  e0 = 0, e1 = std::max(1e-12, e1 * 1.12);
  auto X = [&](double t) { return kLeft + (t - t0) / (t1 - t0) * (kW - kLeft - kRight); };
  auto Y = [&](double e) { return H - bottom - (e - e0) / (e1 - e0) * (H - bottom - top); };
  h += fmt::format("<svg id=\"chart-tradeoff\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\">\n", kW, H, kW, H);
  h += fmt::format("<path d=\"M{0} {1} V{2} H{3}\" stroke=\"#333\" fill=\"none\"/>\n", kLeft, top, H - bottom, kW - kRight);
  h += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">step time (ms, measured on the emulated GPU)</text>\n",
                   (kLeft + kW) / 2, H - 12);
  h += fmt::format("<text x=\"16\" y=\"{}\" transform=\"rotate(-90 16 {})\" text-anchor=\"middle\">energy per step (J)</text>\n",
                   (H - bottom + top) / 2, (H - bottom + top) / 2);
  for (int i = 0; i <= 4; ++i) {
    const double t = t0 + (t1 - t0) * i / 4, e = e0 + (e1 - e0) * i / 4;
    h += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\" class=\"tick\">{:.3f}</text>\n", X(t), H - bottom + 16, t / 1e3);
    h += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\" class=\"tick\">{:.3f}</text>\n", kLeft - 6, Y(e) + 4, e);
  }
  if (!d.plans.empty()) {
    // The target: default time × (1 + max_slowdown), always on the chart.
    h += fmt::format("<path id=\"time-limit\" d=\"M{0:.1f} {1} V{2}\" stroke=\"#999\" stroke-dasharray=\"4 3\" fill=\"none\"/>"
                     "<text x=\"{0:.1f}\" y=\"{3}\" class=\"tick\" text-anchor=\"middle\">time limit (+{4:.1f} %)</text>\n",
                     X(limit_us), top, H - bottom, top - 6, 100 * delta);
  }
  // Labels: plans at (nearly) the same point share one label line, so names never print over each other.
  std::vector<std::pair<double, double>> placed;  // label anchors already used
  for (size_t i = 0; i < d.plans.size(); ++i) {
    const session::EvaluatedPlan& r = d.plans[i];
    const char* color = r.name == "default" ? "#555" : r.name == "policy" ? "#d62728" : kPalette[i % 8];
    const double cx = X(r.measured.mean_step_ns() / 1e3), cy = Y(r.measured.energy_j);
    double ly = cy - 6;
    for (bool moved = true; moved;) {
      moved = false;
      for (const auto& [px, py] : placed) {
        if (std::abs(px - (cx + 9)) < 90 && std::abs(py - ly) < 12) {
          ly = py - 13;
          moved = true;
        }
      }
    }
    placed.emplace_back(cx + 9, ly);
    h += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\"><title>{}: {:.3f} ms, {:.4f} J</title></circle>"
                     "<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"lbl\" fill=\"{}\">{}</text>\n",
                     cx, cy, r.name == "policy" ? 7 : 5, color, esc(r.name), r.measured.mean_step_ns() / 1e6, r.measured.energy_j,
                     cx + 9, ly, color, esc(r.name));
  }
  h += "</svg>\n";
}

void timeline(std::string& h, const ReportData& d) {
  const pack::Packing& p = *d.packing;
  const double row = 40, top = 10;
  const double H = top + row * double(p.gpus.size()) + 70;
  // One scale per device (ReportData::scale_*), widened only if a pack's clock falls outside it.
  int lo = d.scale_min_mhz > 0 ? d.scale_min_mhz : d.default_clock_mhz;
  int hi = d.scale_max_mhz > 0 ? d.scale_max_mhz : d.default_clock_mhz;
  for (int c : d.pack_clock_mhz) lo = std::min(lo, c), hi = std::max(hi, c);
  const double step = double(std::max<int64_t>(1, p.step_ns));
  auto X = [&](int64_t ns) { return kLeft + double(ns) / step * (kW - kLeft - kRight); };
  h += fmt::format("<svg id=\"chart-timeline\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\">\n", kW, H, kW, H);
  for (size_t gi = 0; gi < p.gpus.size(); ++gi) {
    const double y = top + row * double(gi);
    const int rank_id = gi < d.workload->graph.rank_ids.size() ? d.workload->graph.rank_ids[gi] : int(gi);
    h += fmt::format("<text x=\"6\" y=\"{:.1f}\" class=\"lbl\">GPU rank {}</text>\n", y + 16, rank_id);
    if (gi < d.analysis->gpus.size()) {
      const auto& u = d.analysis->gpus[gi];
      h += fmt::format("<text x=\"6\" y=\"{:.1f}\" class=\"tick\">busy {:.0f} %</text>\n", y + 30,
                       100.0 * double(u.busy_ns) / double(std::max<int64_t>(1, u.busy_ns + u.idle_ns)));
    }
    h += fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"22\" fill=\"#eee\"/>\n", kLeft, y + 2, kW - kLeft - kRight);
  }
  for (size_t i = 0; i < p.packs.size(); ++i) {
    const pack::Pack& pk = p.packs[i];
    const double y = top + row * double(pk.rank.index());
    const int c = i < d.pack_clock_mhz.size() ? d.pack_clock_mhz[i] : d.default_clock_mhz;
    const double x0 = X(pk.begin_ns), w = std::max(0.5, X(pk.end_ns) - x0);
    h += fmt::format("<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"22\" fill=\"{}\" stroke=\"#fff\" stroke-width=\"0.3\">"
                     "<title>pack {}: {} MHz, {:.1f}–{:.1f} µs, {}, {}</title></rect>\n",
                     x0, y + 2, w, clock_color(c, lo, hi), i, c, double(pk.begin_ns) / 1e3, double(pk.end_ns) / 1e3,
                     pack::to_string(pk.slack), pack::to_string(pk.bound));
    // The clock, written on the pack where it fits.
    if (w >= 34)
      h += fmt::format("<text x=\"{:.2f}\" y=\"{:.1f}\" class=\"tick\" text-anchor=\"middle\" fill=\"#fff\">{}</text>\n",
                       x0 + w / 2, y + 17, c);
    // Busy share of the pack as a dark strip under it (the rest of the pack is idle time).
    const double bw = w * std::clamp(double(pk.busy_ns) / double(std::max<int64_t>(1, pk.end_ns - pk.begin_ns)), 0.0, 1.0);
    if (bw > 0)
      h += fmt::format("<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"5\" fill=\"#333\"/>\n", x0, y + 26, bw);
  }
  const double ly = top + row * double(p.gpus.size()) + 10;
  h += fmt::format("<path d=\"M{0} {1} H{2}\" stroke=\"#333\" fill=\"none\"/>\n", kLeft, ly, kW - kRight);
  h += fmt::format("<text x=\"{}\" y=\"{}\" class=\"tick\">0</text><text x=\"{}\" y=\"{}\" class=\"tick\" text-anchor=\"end\">{:.3f} ms</text>\n",
                   kLeft, ly + 14, kW - kRight, ly + 14, step / 1e6);
  for (int k = 0; k <= 8; ++k) {
    const int c = lo + (hi - lo) * k / 8;
    h += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"30\" height=\"10\" fill=\"{}\"><title>{} MHz</title></rect>",
                     kLeft + 200 + k * 32, ly + 26, clock_color(c, lo, hi), c);
    if (k % 2 == 0)
      h += fmt::format("<text x=\"{}\" y=\"{}\" class=\"tick\" text-anchor=\"middle\">{}</text>", kLeft + 215 + k * 32,
                       ly + 50, c);
  }
  h += fmt::format("<text x=\"{}\" y=\"{}\" class=\"tick\" text-anchor=\"end\">{} MHz</text><text x=\"{}\" y=\"{}\" class=\"tick\">{} MHz (dark strip: busy share)</text>\n",
                   kLeft + 194, ly + 35, lo, kLeft + 200 + 9 * 32 + 4, ly + 35, hi);
  h += "</svg>\n";
}

// The packs as a table: where each is, what it holds and the clock the policy gives it (the first
// kMaxRows; packs.csv has them all).
void pack_table(std::string& h, const ReportData& d) {
  constexpr size_t kMaxRows = 60;
  const pack::Packing& p = *d.packing;
  const graph::Graph& g = d.workload->graph;
  h += "<table id=\"pack-table\"><tr><th>pack</th><th>GPU rank</th><th>begin (µs)</th><th>end (µs)</th><th>busy (µs)</th>"
       "<th>slack</th><th>bound</th><th>kernels</th><th>first kernel</th><th>clock (MHz)</th></tr>\n";
  for (size_t i = 0; i < p.packs.size() && i < kMaxRows; ++i) {
    const pack::Pack& pk = p.packs[i];
    const pack::GpuOps& go = p.gpus[pk.rank.index()];
    const int c = i < d.pack_clock_mhz.size() ? d.pack_clock_mhz[i] : d.default_clock_mhz;
    std::string first = pk.first_op <= pk.last_op && pk.first_op < go.ops.size()
                            ? std::string(g.strings.view(g.name[go.ops[pk.first_op]]))
                            : std::string("(idle)");
    if (first.size() > 60) first = first.substr(0, 57) + "...";
    const int64_t kernels = pk.first_op <= pk.last_op ? int64_t(pk.last_op) - int64_t(pk.first_op) + 1 : 0;
    h += fmt::format("<tr><td>{}</td><td>{}</td><td>{:.1f}</td><td>{:.1f}</td><td>{:.1f}</td><td>{}</td><td>{}</td><td>{}</td>"
                     "<td style=\"text-align:left\">{}</td><td>{}</td></tr>\n",
                     i, g.rank_id(go.rank), double(pk.begin_ns) / 1e3, double(pk.end_ns) / 1e3, double(pk.busy_ns) / 1e3,
                     pack::to_string(pk.slack), pack::to_string(pk.bound), kernels, esc(first), c);
  }
  h += "</table>\n";
  if (p.packs.size() > kMaxRows)
    h += fmt::format("<p>... {} more packs in packs.csv.</p>\n", p.packs.size() - kMaxRows);
}

void breakdown(std::string& h, const ReportData& d) {
  const auto& cp = d.analysis->critical_path;
  const double H = 120, y = 20;
  double total = 0;
  for (const auto& part : cp.breakdown) total += double(part.ns);
  h += fmt::format("<svg id=\"chart-critical-path\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\">\n", kW, H, kW, H);
  h += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"30\" fill=\"#eee\"/>\n", kLeft, y, kW - kLeft - kRight);
  h += fmt::format("<text x=\"6\" y=\"{}\" class=\"lbl\">{:.3f} ms</text>\n", y + 20, double(cp.length_ns) / 1e6);
  double x = kLeft;
  size_t k = 0;
  for (const auto& part : cp.breakdown) {
    if (part.ns <= 0) continue;  // categories the path does not touch get no legend entry
    const double w = total > 0 ? double(part.ns) / total * (kW - kLeft - kRight) : 0;
    const char* color = kPalette[k % 8];
    if (w > 0)
      h += fmt::format("<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"30\" fill=\"{}\"><title>{}: {:.3f} ms</title></rect>\n",
                       x, y, w, color, esc(part.category), double(part.ns) / 1e6);
    h += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" y=\"{}\" class=\"tick\">{} {:.1f} %</text>\n",
                     kLeft + double(k % 4) * 200, y + 45 + double(k / 4) * 18, color, kLeft + double(k % 4) * 200 + 14,
                     y + 54 + double(k / 4) * 18, esc(part.category), total > 0 ? 100.0 * double(part.ns) / total : 0.0);
    x += w;
    ++k;
  }
  h += "</svg>\n";
}

void slack_histogram(std::string& h, const ReportData& d) {
  const graph::Graph& g = d.workload->graph;
  const char* labels[] = {"< 1 µs", "1–10 µs", "10–100 µs", "0.1–1 ms", "1–10 ms", "≥ 10 ms"};
  int64_t bins[6] = {0, 0, 0, 0, 0, 0};
  for (graph::NodeId n = 0; n < g.num_nodes(); ++n) {
    if (!graph::is_gpu(g.kind[n]) || n >= d.analysis->slack_ns.size()) continue;
    const int64_t s = d.analysis->slack_ns[n];
    const int b = s < 1000 ? 0 : s < 10000 ? 1 : s < 100000 ? 2 : s < 1000000 ? 3 : s < 10000000 ? 4 : 5;
    ++bins[b];
  }
  const int64_t mx = std::max<int64_t>(1, *std::max_element(bins, bins + 6));
  const double H = 260, top = 20, base = 210, bw = (kW - kLeft - kRight) / 6;
  h += fmt::format("<svg id=\"chart-slack\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\">\n", kW, H, kW, H);
  h += fmt::format("<path d=\"M{0} {1} V{2} H{3}\" stroke=\"#333\" fill=\"none\"/>\n", kLeft, top, base, kW - kRight);
  h += fmt::format("<text x=\"6\" y=\"{}\" class=\"lbl\">GPU ops</text>\n", top + 10);
  for (int b = 0; b < 6; ++b) {
    const double bh = double(bins[b]) / double(mx) * (base - top);
    const double x = kLeft + bw * b + 8;
    h += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#4e79a7\"><title>{}: {}</title></rect>\n",
                     x, base - bh, bw - 16, bh, esc(labels[b]), bins[b]);
    h += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"tick\" text-anchor=\"middle\">{}</text>\n", x + (bw - 16) / 2, base - bh - 4, bins[b]);
    h += fmt::format("<text x=\"{:.1f}\" y=\"{}\" class=\"tick\" text-anchor=\"middle\">{}</text>\n", x + (bw - 16) / 2, base + 16, esc(labels[b]));
  }
  h += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">slack (how much later an op could end without delaying the step)</text>\n",
                   (kLeft + kW) / 2, H - 12);
  h += "</svg>\n";
}

void profiling(std::string& h, const ReportData& d) {
  const pack::Packing& p = *d.packing;
  const double H = 110;
  const double mx = double(std::max<int64_t>(1, std::max(p.kernel_units, p.profiled_units)));
  const double span = kW - kLeft - kRight - 160;
  h += fmt::format("<svg id=\"chart-profiling\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\">\n", kW, H, kW, H);
  const struct { const char* what; int64_t units; const char* color; } rows[] = {
      {"per kernel", p.kernel_units, "#bab0ac"}, {"per signature", p.profiled_units, "#59a14f"}};
  for (int i = 0; i < 2; ++i) {
    const double y = 15 + 35 * i;
    const double w = std::max(1.0, double(rows[i].units) / mx * span);
    h += fmt::format("<text x=\"6\" y=\"{}\" class=\"lbl\">{}</text><rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"24\" fill=\"{}\"/>"
                     "<text x=\"{:.1f}\" y=\"{}\" class=\"tick\">{} units</text>\n",
                     y + 16, rows[i].what, kLeft, y, w, rows[i].color, kLeft + w + 6, y + 16, rows[i].units);
  }
  h += fmt::format("<text x=\"{}\" y=\"{}\" class=\"tick\">{:.1f}× fewer profiling units ({} signatures × {} clocks instead of {} GPU ops × {} clocks)</text>\n",
                   kLeft, H - 10, p.reduction(), p.signatures.size(), p.plan_clocks_mhz.size(), p.kernel_ops, p.plan_clocks_mhz.size());
  h += "</svg>\n";
}

}  // namespace

std::string render_html(const ReportData& d) {
  const nlohmann::json& s = d.summary;
  std::string h;
  h.reserve(1 << 16);
  h += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>EMO report</title>\n<style>\n"
       "body{font:14px sans-serif;margin:24px;max-width:1000px;color:#222}h1{font-size:22px}h2{font-size:17px;margin-top:28px}"
       "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f4f4f4}"
       "td:first-child,th:first-child{text-align:left}svg{display:block;margin:6px 0}.tick{font-size:11px;fill:#444}"
       ".lbl{font-size:12px;fill:#222}\n</style></head><body>\n";
  h += "<h1>EMO report</h1>\n";
  if (s.contains("warnings") && s["warnings"].is_array()) {
    for (const auto& w : s["warnings"]) {
      if (w.is_string()) h += "<p style=\"color:#a40000\"><b>Warning:</b> " + esc(w.get<std::string>()) + "</p>\n";
    }
  }
  const double saving = s.contains("policy") ? s["policy"].value("saving_pct", 0.0) : 0.0;
  const double slowdown = s.contains("policy") ? s["policy"].value("slowdown_pct", 0.0) : 0.0;
  h += fmt::format("<p>Device <b>{}</b>, allowed slowdown {:.1f} %: the policy saves <b>{:.2f} %</b> of the step's GPU energy "
                   "at {:+.2f} % step time (measured on the emulated GPU). {} packs, {} signatures.</p>\n",
                   esc(s.value("device", "")), 100.0 * s.value("max_slowdown", 0.0), saving, slowdown, d.packing->packs.size(),
                   d.packing->signatures.size());

  h += "<h2>1. Time and energy of each plan</h2>\n";
  scatter(h, d);
  h += "<table><tr><th>plan</th><th>predicted time (µs)</th><th>predicted energy (J)</th><th>true time (µs)</th>"
       "<th>true energy (J)</th><th>saving %</th><th>slowdown %</th></tr>\n";
  for (const session::EvaluatedPlan& r : d.plans) {
    h += fmt::format("<tr><td>{}</td><td>{:.1f}</td><td>{:.4f}</td><td>{:.1f}</td><td>{:.4f}</td><td>{:.2f}</td><td>{:+.2f}</td></tr>\n",
                     esc(r.name), double(r.predicted_time_ns) / 1e3, r.predicted_energy_j, r.measured.mean_step_ns() / 1e3,
                     r.measured.energy_j, r.saving_pct, r.slowdown_pct);
  }
  h += "</table>\n";
  if (s.contains("margin") && s["margin"].is_object()) {
    const auto& m = s["margin"];
    h += fmt::format("<p>The policy against the best baseline within the bound (<b>{}</b>, {:.2f} % saved): "
                     "<b>{:+.2f}</b> points of energy saved.</p>\n",
                     esc(m.value("best_baseline", "")), m.value("baseline_saving_pct", 0.0), m.value("points", 0.0));
  }

  h += "<h2>2. Packs on each GPU, colored by the policy's SM clock</h2>\n";
  timeline(h, d);
  pack_table(h, d);
  h += "<h2>3. Critical path</h2>\n";
  breakdown(h, d);
  h += "<h2>4. Slack of GPU ops</h2>\n";
  slack_histogram(h, d);
  h += "<h2>5. Profiling cost</h2>\n";
  profiling(h, d);

  h += "<h2>Run</h2>\n<table>\n";
  auto row = [&](const std::string& k, const std::string& v) { h += "<tr><td>" + esc(k) + "</td><td>" + esc(v) + "</td></tr>\n"; };
  row("ranks", std::to_string(d.workload->ranks.size()));
  row("events", std::to_string(d.workload->events));
  row("GPU ops", std::to_string(d.packing->kernel_ops));
  row("replay error", fmt::format("{:.3f} %", s.value("replay_error_pct", 0.0)));
  row("profiled clocks (MHz)", fmt::format("{}", fmt::join(d.packing->plan_clocks_mhz, ", ")));
  row("policy from", s.value("policy_from", ""));
  if (s.contains("stage_ms") && s["stage_ms"].is_object()) {
    // In pipeline order (the summary's keys are sorted by name).
    for (const char* k : {"synth", "analyze", "pack", "profile", "fit", "optimize", "evaluate", "views", "total"}) {
      if (auto it = s["stage_ms"].find(k); it != s["stage_ms"].end() && it->is_number())
        row(std::string("stage ") + k, fmt::format("{:.1f} ms", it->get<double>()));
    }
  }
  h += "</table>\n</body></html>\n";
  return h;
}

}  // namespace emo::report
