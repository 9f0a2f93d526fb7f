#!/usr/bin/env bash
# Formats the C++ and CUDA sources (every tracked *.h *.cpp *.cu *.cuh) with
# clang-format and the repository's .clang-format.
#   scripts/format.sh --check   lists the files whose formatting differs; exit 1 if any
#   scripts/format.sh --fix     rewrites those files in place
# CLANG_FORMAT names the binary (default: clang-format-14 if present, else
# clang-format). Other major versions format some constructs differently, so a
# check with one is reported as such: the tree is formatted with version 14.
# kernels/profiling_device.{h,cpp} are left out: scripts/gen_profiling_device.py
# writes them, and its --check test compares them with its own output.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
EXPECTED_MAJOR=14

mode="${1:-}"
case "$mode" in
  --check|--fix) ;;
  *) echo "usage: scripts/format.sh --check | --fix" >&2; exit 2 ;;
esac

if [ -z "${CLANG_FORMAT:-}" ]; then
  if command -v clang-format-$EXPECTED_MAJOR >/dev/null 2>&1; then
    CLANG_FORMAT=clang-format-$EXPECTED_MAJOR
  else
    CLANG_FORMAT=clang-format
  fi
fi
if ! command -v "$CLANG_FORMAT" >/dev/null 2>&1; then
  echo "format: $CLANG_FORMAT not found (scripts/setup.sh installs clang-format)" >&2
  exit 2
fi
major="$("$CLANG_FORMAT" --version | sed -n 's/.*version \([0-9][0-9]*\).*/\1/p')"
if [ "$major" != "$EXPECTED_MAJOR" ]; then
  echo "format: warning: $CLANG_FORMAT is version ${major:-unknown}, the tree is formatted with" \
       "$EXPECTED_MAJOR; differences below may come from the version alone" >&2
fi

cd "$ROOT"
differ=()
while IFS= read -r -d '' f; do
  [ -f "$f" ] || continue  # deleted in the work tree, not yet in the index
  if ! "$CLANG_FORMAT" --style=file "$f" | cmp -s - "$f"; then
    differ+=("$f")
  fi
done < <(git ls-files -z -- '*.h' '*.cpp' '*.cu' '*.cuh' \
           ':!kernels/profiling_device.h' ':!kernels/profiling_device.cpp')

if [ ${#differ[@]} -eq 0 ]; then
  exit 0
fi
if [ "$mode" = "--fix" ]; then
  "$CLANG_FORMAT" --style=file -i "${differ[@]}"
  printf 'format: rewrote %s\n' "${differ[@]}"
  exit 0
fi
printf '%s\n' "${differ[@]}"
echo "format: ${#differ[@]} file(s) differ from .clang-format; scripts/format.sh --fix rewrites them" >&2
exit 1
