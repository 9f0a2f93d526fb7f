#!/usr/bin/env bash
# The test command for a fresh machine: installs what is missing, builds, runs
# every test that does not need a GPU (unit, cli, mpi; gpu tests skip here).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
"$ROOT/scripts/setup.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1
BUILD_DIR="${BUILD_DIR:-$ROOT/build}" "$ROOT/scripts/build.sh"
cd "${BUILD_DIR:-$ROOT/build}"
ctest --output-on-failure -j "$(nproc)" "$@"
