#!/usr/bin/env bash
# Installs what gpuledger needs to build, test and plot, when it is missing;
# does nothing when everything is present. As a non-root user with packages
# missing, it prints the exact command to run and exits 1.
set -euo pipefail

APT_PACKAGES=(g++ cmake ninja-build git
              libopenmpi-dev openmpi-bin libopenblas-dev
              nlohmann-json3-dev libcli11-dev libfmt-dev
              libgtest-dev libbenchmark-dev
              python3 python3-matplotlib)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  [ "${1:-}" = "--verbose" ] && echo "setup: all packages present"
  exit 0
fi

echo "setup: missing packages: ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=sudo
  else
    echo "setup: not root. Install them with:"
    echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}"
    exit 1
  fi
else
  SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: installed ${missing[*]}"
