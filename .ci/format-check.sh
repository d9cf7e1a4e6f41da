#!/usr/bin/env bash
# Fails when a C++ or CUDA source differs from what clang-format (the root .clang-format) would
# write. In a git checkout it checks the tracked files; in an unpacked source tree (no git or no
# .git) every source under the project's folders.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
  echo "clang-format: not installed (apt-get install clang-format); format check skipped"
  exit 0
fi
if command -v git >/dev/null && git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files -z '*.cpp' '*.h' '*.cu' '*.cuh'
else
  find engine gui backend kernels resources tests -type f \
    \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -print0
fi | xargs -0 clang-format --dry-run -Werror
echo "clang-format: clean"
