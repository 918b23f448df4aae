#!/usr/bin/env bash
# Installs the Debian 12 packages EMO builds with (as root, or through sudo).
# Only missing packages are installed, so a second run is quick. libglpk-dev is the MILP solver of the
# optimizer's exact oracle; chromium renders report.html in the headless-browser test; python3-venv and
# python3-dev build and test the Python package (docs/python.md); libdeflate-dev (optional: without it zlib does)
# inflates gzip'd traces at twice zlib's speed.
set -euo pipefail
packages=(cmake ninja-build g++ clang libclang-rt-14-dev pkg-config
          libsimdjson-dev libfmt-dev nlohmann-json3-dev libcli11-dev zlib1g-dev libdeflate-dev
          libgtest-dev libgmock-dev libbenchmark-dev python3 python3-venv python3-dev
          libglpk-dev chromium libopenmpi-dev openmpi-bin)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "error: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
echo "installing: ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
