#!/usr/bin/env bash
# Builds the readers' fuzz target with clang's libFuzzer (address and undefined-behaviour
# sanitizers) and runs it for a bounded time on the seed corpus.
#   usage: tests/fuzz/run-fuzzer.sh BUILD_DIR SECONDS
set -euo pipefail
build=${1:-build}
seconds=${2:-30}
root="$(cd "$(dirname "$0")/../.." && pwd)"
if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found; skipping the libFuzzer run (the corpus replay ran in CTest)"
  exit 0
fi
out="$build/fuzz"
mkdir -p "$out/corpus"
# clang without its runtime libraries (libclang-rt-*-dev) compiles but cannot link a fuzzer.
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char *, unsigned long) { return 0; }' \
  >"$out/probe.cpp"
if ! clang++ -fsanitize=fuzzer,address,undefined "$out/probe.cpp" -o "$out/probe" 2>/dev/null; then
  echo "fuzz: clang++ cannot link libFuzzer with the sanitizers (apt-get install" \
    "libclang-rt-14-dev); skipping the libFuzzer run (the corpus replay ran in CTest)"
  exit 0
fi
cp "$root"/tests/fuzz/corpus/* "$root"/resources/plans/* "$out/corpus/" 2>/dev/null || true
sources=$(ls "$root"/engine/*.cpp "$root"/engine/generators/*.cpp "$root"/engine/model/*.cpp)
clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I"$root" $sources "$build/resources/embedded_resources.cpp" "$root/tests/fuzz/fuzz_readers.cpp" \
  -o "$out/fuzz_readers"
"$out/fuzz_readers" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$out/" "$out/corpus" 2>&1 | tail -n 12
echo "fuzz: $seconds s of libFuzzer on the plan, trace, schedule and CSV readers found no crash"
