#!/usr/bin/env bash
# Loads report.html of `emo run` in headless Chromium and checks that the five charts are in the DOM
# with drawn content. Skipped (exit 0) where chromium is not installed.
set -euo pipefail
emo="$1"
browser=$(command -v chromium || command -v chromium-browser || true)
if [[ -z "$browser" ]]; then
  echo "SKIP: chromium is not installed (apt-get install chromium to run this test)"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$emo" synth train-dp --ranks 2 --layers 2 -o "$tmp/in" >/dev/null
"$emo" run "$tmp"/in/train-dp_rank*.json -o "$tmp/rep" >/dev/null
dom=$(timeout 120 "$browser" --headless --no-sandbox --disable-gpu --dump-dom "file://$tmp/rep/report.html" 2>/dev/null)
for id in chart-tradeoff chart-timeline chart-critical-path chart-slack chart-profiling; do
  chart=$(printf '%s' "$dom" | tr '\n' ' ' | grep -o "<svg id=\"$id\".*" | sed 's#</svg>.*##')
  if [[ -z "$chart" ]]; then echo "FAIL: $id missing from the rendered page"; exit 1; fi
  if ! grep -qE '<(rect|circle|path)' <<<"$chart"; then echo "FAIL: $id has nothing drawn"; exit 1; fi
done
echo "ok: five charts rendered"
