#!/usr/bin/env bash
# Builds EMO and runs every test: the release build with warnings as errors,
# the same tests under AddressSanitizer + UndefinedBehaviorSanitizer, and a
# short libFuzzer run of the trace reader and of the other readers. `--quick` stops after the first.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs=$(nproc)

echo "== release build + tests"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMO_WERROR=ON >/dev/null
ninja -C build -j "$jobs"
# Wherever nvcc is installed, the CUDA microbenchmarks must have been built (proof that they compile).
nvcc_bin=$(command -v nvcc || true)
if [ -z "$nvcc_bin" ] && [ -x /usr/local/cuda/bin/nvcc ]; then nvcc_bin=/usr/local/cuda/bin/nvcc; fi
if [ -n "$nvcc_bin" ] && [ ! -x build/tools/emo/emo-microbench ]; then
  echo "error: nvcc ($nvcc_bin) is installed but emo-microbench was not built (see the CMake output)"
  exit 1
fi
ctest --test-dir build --output-on-failure -j "$jobs"

# The Python package (docs/python.md): `pip install .` into a venv kept outside the checkout
# ($EMO_VENV, default ~/.cache/emo/venv: PyPI's torch, several GB, is installed into it once per
# machine and reused) with its build folder (build-python/<wheel tag>, incremental), then its tests
# against the CLI just built — emo.torch's train a small model on the CPU.
echo "== Python package (pip install .) + pytest"
py_start=$SECONDS
venv=${EMO_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/emo/venv}
[ -x "$venv/bin/python" ] || { mkdir -p "$(dirname "$venv")" && python3 -m venv "$venv"; }
"$venv/bin/python" -m pip install -q --disable-pip-version-check scikit-build-core nanobind numpy pandas pytest tqdm
if ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  echo "installing torch into $venv (once per machine)"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check torch
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation .
PYTHONDONTWRITEBYTECODE=1 EMO_CLI=build/tools/emo/emo EMO_NVML_STANDIN_DIR=build/tests/nvml_standin \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests
echo "Python package and tests: $((SECONDS - py_start)) s"
[ "${1:-}" = "--quick" ] && exit 0

echo "== ASan/UBSan build + tests"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEMO_SANITIZE=ON -DEMO_BUILD_BENCH=OFF \
  -DEMO_BUILD_GPU=OFF >/dev/null
ninja -C build-asan -j "$jobs"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j "$jobs"

if [ -f fuzz/CMakeLists.txt ]; then
  echo "== fuzzing the trace reader and the other readers (60 s each)"
  CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEMO_BUILD_FUZZ=ON \
    -DEMO_BUILD_TESTS=OFF -DEMO_BUILD_BENCH=OFF -DEMO_BUILD_GPU=OFF >/dev/null
  ninja -C build-fuzz -j "$jobs" trace_reader_fuzz inputs_fuzz
  for target in trace_reader inputs; do
    corpus=$(mktemp -d)
    cp fuzz/corpus/"$target"/* "$corpus"/
    build-fuzz/fuzz/"$target"_fuzz -max_total_time=60 -timeout=10 -rss_limit_mb=4096 "$corpus" 2>&1 | tail -3
    rm -rf "$corpus"
  done
fi
echo "== all checks passed"
