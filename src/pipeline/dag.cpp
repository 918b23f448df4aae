// The synchronous 1F1B pipeline DAG (DeepSpeed's TrainSchedule, as lowtime's Synchronous1F1B
// yields it) and its longest path. Example, 2 stages × 3 microbatches:
//   stage 0: F0 F1 B0 F2 B1 B2      (1 warm-up forward, then 1F1B, then the remaining backwards)
//   stage 1: F0 B0 F1 B1 F2 B2      (the last stage has no warm-up)
// plus F_i(0) → F_i(1) and B_i(1) → B_i(0).
#include <algorithm>
#include <deque>

#include "emo/pipeline/pipeline.h"

namespace emo::pipeline {

Result<PipelineDag> build_1f1b(int stages, int microbatches) {
  if (stages < 1) return make_error("--stages", "must be >= 1");
  if (microbatches < 1) return make_error("--microbatches", "must be >= 1");
  if (int64_t(stages) * microbatches > (int64_t(1) << 24))
    return make_error("--microbatches", "stages × microbatches is too large (at most 16 M nodes)");
  const size_t n = size_t(stages) * size_t(microbatches) * 2;
  // Provisional ids: (stage, instruction, microbatch) -> stage * 2N + instruction * N + microbatch.
  auto pid = [&](int s, Instruction in, int mb) {
    return uint32_t(size_t(s) * 2 * size_t(microbatches) + size_t(in) * size_t(microbatches) + size_t(mb));
  };
  std::vector<std::vector<uint32_t>> program(static_cast<size_t>(stages));
  for (int s = 0; s < stages; ++s) {
    int warmup = std::min(stages - s - 1, microbatches);
    auto& prog = program[size_t(s)];
    for (int i = 0; i < warmup; ++i) prog.push_back(pid(s, Instruction::kForward, i));
    for (int i = 0; i < microbatches - warmup; ++i) {
      prog.push_back(pid(s, Instruction::kForward, warmup + i));
      prog.push_back(pid(s, Instruction::kBackward, i));
    }
    for (int i = microbatches - warmup; i < microbatches; ++i)
      prog.push_back(pid(s, Instruction::kBackward, i));
  }
  std::vector<std::pair<uint32_t, uint32_t>> edges;
  for (const auto& prog : program) {
    for (size_t i = 1; i < prog.size(); ++i) edges.emplace_back(prog[i - 1], prog[i]);
  }
  for (int s = 0; s + 1 < stages; ++s) {
    for (int mb = 0; mb < microbatches; ++mb) {
      edges.emplace_back(pid(s, Instruction::kForward, mb), pid(s + 1, Instruction::kForward, mb));
      edges.emplace_back(pid(s + 1, Instruction::kBackward, mb), pid(s, Instruction::kBackward, mb));
    }
  }
  // Topological order (Kahn, FIFO), then renumber so that every edge goes to a higher id.
  std::vector<uint32_t> indeg(n, 0), out_begin(n + 1, 0), out(edges.size());
  for (auto [a, b] : edges) ++indeg[b], ++out_begin[a + 1];
  for (size_t v = 0; v < n; ++v) out_begin[v + 1] += out_begin[v];
  {
    std::vector<uint32_t> fill(out_begin.begin(), out_begin.end() - 1);
    for (auto [a, b] : edges) out[fill[a]++] = b;
  }
  std::vector<uint32_t> order;
  order.reserve(n);
  std::deque<uint32_t> ready;
  for (uint32_t v = 0; v < n; ++v) {
    if (indeg[v] == 0) ready.push_back(v);
  }
  while (!ready.empty()) {
    uint32_t v = ready.front();
    ready.pop_front();
    order.push_back(v);
    for (uint32_t k = out_begin[v]; k < out_begin[v + 1]; ++k) {
      if (--indeg[out[k]] == 0) ready.push_back(out[k]);
    }
  }
  if (order.size() != n) return make_error("", "internal: the 1F1B graph has a cycle");  // cannot happen
  std::vector<uint32_t> rank(n);
  for (size_t i = 0; i < n; ++i) rank[order[i]] = uint32_t(i);

  PipelineDag d;
  d.stages = stages;
  d.microbatches = microbatches;
  d.nodes.resize(n);
  for (size_t v = 0; v < n; ++v) {
    size_t s = v / (2 * size_t(microbatches)), rest = v % (2 * size_t(microbatches));
    d.nodes[rank[v]] =
        NodeInfo{int32_t(s), int32_t(rest % size_t(microbatches)), Instruction(rest / size_t(microbatches))};
  }
  for (auto& e : edges) e = {rank[e.first], rank[e.second]};
  auto csr = [&](bool by_head, std::vector<uint32_t>& begin, std::vector<uint32_t>& list) {
    begin.assign(n + 1, 0);
    list.assign(edges.size(), 0);
    for (auto [a, b] : edges) ++begin[(by_head ? b : a) + 1];
    for (size_t v = 0; v < n; ++v) begin[v + 1] += begin[v];
    std::vector<uint32_t> fill(begin.begin(), begin.end() - 1);
    std::vector<std::pair<uint32_t, uint32_t>> sorted = edges;
    std::sort(sorted.begin(), sorted.end());
    for (auto [a, b] : sorted) {
      if (by_head)
        list[fill[b]++] = a;
      else
        list[fill[a]++] = b;
    }
  };
  csr(true, d.pred_begin, d.preds);
  csr(false, d.succ_begin, d.succs);
  d.program.resize(size_t(stages));
  for (size_t s = 0; s < program.size(); ++s) {
    for (uint32_t v : program[s]) d.program[s].push_back(rank[v]);
  }
  return d;
}

namespace {
template <class T>
T longest_path(const PipelineDag& dag, std::span<const T> duration, std::vector<T>& finish) {
  finish.assign(dag.num_nodes(), T(0));
  T end = 0;
  for (size_t v = 0; v < dag.num_nodes(); ++v) {
    T start = 0;
    for (uint32_t k = dag.pred_begin[v]; k < dag.pred_begin[v + 1]; ++k)
      start = std::max(start, finish[dag.preds[k]]);
    finish[v] = start + duration[v];
    end = std::max(end, finish[v]);
  }
  return end;
}
}  // namespace

int64_t makespan(const PipelineDag& dag, std::span<const int64_t> duration) {
  std::vector<int64_t> finish;
  return longest_path(dag, duration, finish);
}

double makespan(const PipelineDag& dag, std::span<const double> duration) {
  std::vector<double> finish;
  return longest_path(dag, duration, finish);
}

}  // namespace emo::pipeline
