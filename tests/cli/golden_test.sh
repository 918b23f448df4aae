#!/usr/bin/env bash
# Golden outputs: `emo analyze --json`, `emo pack --json`, `emo optimize --json` and the policy of
# `emo optimize -o` on the small traces in tests/golden/inputs/ must equal tests/golden/expected/
# (numbers within a relative 1e-9). A difference means an answer changed: see tests/golden/README.md.
# usage: golden_test.sh EMO_BINARY [SHARED_DIR]
set -u
emo=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if python3 "$here/../../scripts/golden.py" --emo "$emo" --check; then
  echo "1 passed, 0 failed"
else
  echo "FAIL: golden outputs differ (see above)"
  echo "0 passed, 1 failed"
  exit 1
fi
