#!/usr/bin/env bash
# clang-tidy (the checks in .clang-tidy, findings are errors) over the engine's and the GUI's
# sources, using the compile commands of BUILD_DIR. The engine is the part every face depends on.
#   usage: .ci/clang-tidy.sh BUILD_DIR
set -euo pipefail
build=${1:-build}
root="$(cd "$(dirname "$0")/.." && pwd)"
if ! command -v clang-tidy >/dev/null; then
  echo "clang-tidy: not installed; skipped"
  exit 0
fi
cd "$root"
ls engine/*.cpp engine/*/*.cpp | xargs -P2 -n4 clang-tidy -p "$build" --quiet \
  --extra-arg=-Wno-unknown-warning-option
echo "clang-tidy: engine clean"
# The explorer (gui/): every library folder and the app, same checks, findings are errors.
ls gui/*.cpp gui/*/*.cpp | xargs -P2 -n4 clang-tidy -p "$build" --quiet \
  --extra-arg=-Wno-unknown-warning-option
echo "clang-tidy: gui clean"
