// Shared by the optimizer and the MILP oracle (not a public header): per-op pack and signature, the
// pack cost model and the full-replay prediction, so both price a plan with exactly the same numbers.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "emo/optimize/optimize.h"
#include "emo/replay/replay.h"

namespace emo::optimize::detail {

// Per GPU op: its pack and its atom's signature; per pack: busy time at the reference clock.
struct Prepared {
  std::vector<std::vector<uint32_t>> op_pack, op_sig, op_pos;  // per GPU op: pack, signature, position in its atom
  std::vector<std::vector<uint32_t>> pack_atoms;  // non-idle atoms of each pack
  std::vector<int64_t> pack_idle_ns;              // idle inside each pack at the reference clock (< 0: overlap)
  // Idle after each pack until the next pack of its GPU starts, in the default clocks' replay; after a
  // GPU's last pack, to the step's end and on from the step's start to its first pack (the next step).
  // A clock stays set until the next change, so this idle runs at the pack's clock.
  std::vector<int64_t> gap_after_ns;
  std::vector<uint32_t> next_pack;  // the next pack of the same GPU (the first one after the last)
  // Per pack with ops, in the default clocks' replay: the start of its first op (ns), and that replay's
  // begin.
  std::vector<int64_t> first_start0;
  int64_t begin0 = 0;
  std::vector<int> clocks;
  // Tables at the candidate clocks (filled when prepare() is asked for them), so that a replay of a
  // plan looks its numbers up: the index of a clock in `clocks` by MHz (−1: not a candidate), each op's
  // time ratio per (signature, position in its atom) and clock, each pack's cost per clock.
  std::vector<int> clock_index;
  std::vector<size_t> sig_row;    // first row of each signature in op_ratio
  std::vector<double> op_ratio;   // [(sig_row[sig] + pos) · clocks.size() + clock index]
  std::vector<std::pair<double, double>> cost;  // [pack · clocks.size() + clock index]: busy s, energy J

  int index_of(int mhz) const {
    return mhz >= 0 && size_t(mhz) < clock_index.size() ? clock_index[size_t(mhz)] : -1;
  }
};

// `tables`: also fill the per-clock tables (worth it when many plans will be replayed).
Prepared prepare(const Problem& pr, bool tables = false);
// Busy time (s) and energy (J) of one pack at clock f (its idle inside and the idle after it until the
// next pack, gap_after_ns, included, at f).
std::pair<double, double> pack_cost(const Problem& pr, const Prepared& x, uint32_t k, double f);
// The latency's spread (p99 − median): how long a clock change lands early (raised, issued a p99
// latency ahead) or late (lowered, issued 2·median − p99 ahead) in the typical case.
double switch_spread_s(const Problem& pr);
// Mean power over pack k's span (busy and the idle inside) at clock f.
double span_power_w(const Problem& pr, const Prepared& x, uint32_t k, double f);
// Extra energy of the change from pack j (at `from`) to the next pack k (at `to`) of its GPU: a raise
// lands a spread early, so the end of what j owns (its gap after, then its span) runs at `to`; a lowering
// lands a spread late, so the start of k (its span, then its gap) runs at `from`. Idle time pays the idle
// power's difference, a pack's span its mean power's.
double switch_energy_j(const Problem& pr, const Prepared& x, uint32_t j, uint32_t k, int from, int to);
// One full replay of a plan: makespan and energy (packs, idle at the default clock, clock switches).
Plan predict_prepared(const Problem& pr, const Prepared& x, std::vector<int> clocks, std::string name,
                      replay::Timeline* tl_out = nullptr, std::vector<int64_t>* dur_out = nullptr);

}  // namespace emo::optimize::detail
