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
  std::vector<int64_t> pack_idle_ns;              // idle inside each pack at the reference clock
  // Per pack with ops, in the default clocks' replay: start of its first op, end of its last (ns), and
  // that replay's begin.
  std::vector<int64_t> first_start0, last_end0;
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
// Busy time (s) and energy (J) of one pack at clock f (its idle inside included, at f).
std::pair<double, double> pack_cost(const Problem& pr, const Prepared& x, uint32_t k, double f);
// Extra power while a pack runs at the higher of two clocks instead of the one it was given.
double switch_power_w(const Problem& pr, const Prepared& x, uint32_t k, int from, int to);
// How long a switch into pack k runs at the higher clock: the latency's spread (p99 − median), but no
// longer than the pack itself (the next switch follows it; kernel-level packs last microseconds).
double switch_window_s(const Problem& pr, uint32_t k);
// One full replay of a plan: makespan and energy (packs, idle at the default clock, clock switches).
Plan predict_prepared(const Problem& pr, const Prepared& x, std::vector<int> clocks, std::string name,
                      replay::Timeline* tl_out = nullptr, std::vector<int64_t>* dur_out = nullptr);

}  // namespace emo::optimize::detail
