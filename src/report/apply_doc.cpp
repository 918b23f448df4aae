// `emo apply`'s document over a session. See emo/report/views.h.
#include <fmt/format.h>

#include "emo/report/views.h"

namespace emo::report {

Result<ApplyDocument> apply_document(session::Session& s, const backends::ApplyOptions& ao, bool evaluate) {
  if (!s.target().emulated()) {
    return Error{"--device " + s.options().device, "emo apply runs the job on the emulated GPU",
                 "use emulated:NAME; on hardware the runtime runs inside the job (docs/runtime.md)"};
  }
  if (ao.block_steps < 0) return Error{"--block-steps", fmt::format("must be 0 (auto) or more, got {}", ao.block_steps), ""};
  auto w = s.workload();
  if (!w) return w.error();
  auto pol = s.policy();
  if (!pol) return pol.error();
  auto r = backends::apply_emulated(s.target(), **w, **pol, ao);
  if (!r) return r.error();
  ApplyDocument out;
  out.document = backends::apply_json(*r);
  out.document["device"] = s.options().device;
  out.document["max_slowdown"] = (*pol)->max_slowdown;
  out.document["verify"] = ao.verify;
  for (const auto& f : r->fallbacks)
    out.warnings.push_back(fmt::format("the policy was dropped for the default clock from step {}: {}", f.step, f.reason));
  if (evaluate) {
    auto ev = s.evaluation();
    if (!ev) return ev.error();
    for (const auto& p : **ev) {
      if (p.name == "policy") out.document["evaluate"] = {{"saving_pct", p.saving_pct}, {"slowdown_pct", p.slowdown_pct}};
    }
  }
  return out;
}

}  // namespace emo::report
