#!/usr/bin/env bash
# The main job on the built-in example: generate a 2-rank data-parallel
# transformer training trace, then analyze it (critical path, slack, replay check).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build emo >/dev/null
out=out/example
build/tools/emo/emo synth train-dp --ranks 2 --layers 4 --seed 1 -o "$out"
build/tools/emo/emo analyze "$out"/train-dp_rank*.json --json "$out/analysis.json" \
  --critical-path-csv "$out/critical_path.csv" --kernels-csv "$out/kernels.csv"
echo "machine-readable results: $out/analysis.json, $out/critical_path.csv, $out/kernels.csv"
