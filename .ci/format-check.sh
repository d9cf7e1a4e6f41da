#!/usr/bin/env bash
# Fails when a tracked C++ or CUDA file differs from what clang-format (the root .clang-format)
# would write.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
  echo "clang-format: not installed; skipped"
  exit 0
fi
git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' | xargs clang-format --dry-run -Werror
echo "clang-format: clean"
