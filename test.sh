#!/usr/bin/env bash
# Installs what is missing, builds everything with warnings as errors, and runs the whole test
# suite (CTest: the QtTest suites, the CLI checks, the backend on MPI ranks), clang-tidy on the
# engine and the backend, and a bounded fuzz run of the plan and schedule readers. CI runs exactly
# this inside a pristine Debian root (.ci/run).
set -euo pipefail
cd "$(dirname "$0")"
bash .ci/install-deps.sh --test
bash .ci/format-check.sh
source .ci/configure.sh
configure build -DCMAKE_BUILD_TYPE=Release -DPIPESCOPE_WARNINGS_AS_ERRORS=ON
cmake --build build -j2
bash .ci/clang-tidy.sh build
(cd build && QT_QPA_PLATFORM=offscreen ctest --output-on-failure -j2)
bash tests/fuzz/run-fuzzer.sh build "${PIPESCOPE_FUZZ_SECONDS:-30}"
