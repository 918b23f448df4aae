#!/usr/bin/env bash
# The main job on the built-in example: synthesize a 4-rank pipeline-parallel training step, analyze it,
# pack its GPU ops, profile and fit the packs on the emulated H100, optimize a clock per pack within 5 %
# slowdown, evaluate the policy and the baselines, and write the report folder emo-report/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build emo >/dev/null
build/tools/emo/emo run -o emo-report
echo "open emo-report/report.html; load emo-report/overlay.json in Perfetto or chrome://tracing"
