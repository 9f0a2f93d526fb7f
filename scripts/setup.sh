#!/usr/bin/env bash
# Installs what gpuledger needs to build, test, fuzz, check formatting and plot, when
# it is missing; does nothing when everything is present. As a non-root user
# with packages missing, it prints the exact command to run and exits 1.
# ccache is optional (it speeds up rebuilds): installed with the others when
# anything is installed, and otherwise only when this user can install.
set -euo pipefail

APT_PACKAGES=(g++ cmake ninja-build git
              libopenmpi-dev openmpi-bin libopenblas-dev
              nlohmann-json3-dev libcli11-dev libfmt-dev
              libgtest-dev libbenchmark-dev
              python3 python3-matplotlib python3-yaml  # plots; the nightly workflow test parses its YAML
              clang-format
              clang libclang-rt-dev)  # the libFuzzer targets (scripts/fuzz.sh): clang and its fuzzer runtime
OPTIONAL_PACKAGES=(ccache)

is_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

missing=()
for p in "${APT_PACKAGES[@]}"; do
  is_installed "$p" || missing+=("$p")
done
optional=()
for p in "${OPTIONAL_PACKAGES[@]}"; do
  is_installed "$p" || command -v "$p" >/dev/null 2>&1 || optional+=("$p")
done

if [ ${#missing[@]} -eq 0 ] && [ ${#optional[@]} -eq 0 ]; then
  [ "${1:-}" = "--verbose" ] && echo "setup: all packages present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=sudo
  elif [ ${#missing[@]} -eq 0 ]; then
    echo "setup: optional, not installed: ${optional[*]} (sudo apt-get install -y ${optional[*]})"
    exit 0
  else
    echo "setup: missing packages: ${missing[*]}"
    echo "setup: not root. Install them with:"
    echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]} ${optional[*]}"
    exit 1
  fi
else
  SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
if [ ${#missing[@]} -eq 0 ]; then
  # Only optional packages: a failure to install them does not stop anything.
  if { $SUDO apt-get update -qq && \
       $SUDO apt-get install -y -qq --no-install-recommends "${optional[@]}" >/dev/null; }; then
    echo "setup: installed ${optional[*]}"
  else
    echo "setup: could not install the optional ${optional[*]}; going on without"
  fi
  exit 0
fi
missing+=("${optional[@]}")
echo "setup: missing packages: ${missing[*]}"
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: installed ${missing[*]}"
