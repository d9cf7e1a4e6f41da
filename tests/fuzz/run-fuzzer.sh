#!/usr/bin/env bash
# Builds the fuzz targets with clang's libFuzzer (address and undefined-behaviour sanitizers) and
# runs each on its seed corpus, the SECONDS split between them:
#   fuzz_readers   — plan, trace, custom schedule and CSV readers
#   fuzz_arguments — the CLI's argument parser
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
mkdir -p "$out/corpus" "$out/corpus_arguments"
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
  -I"$root")
probe="$out/probe.cpp"
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char *, unsigned long) { return 0; }' \
  >"$probe"
if ! clang++ "${flags[@]}" "$probe" -o "$out/probe" 2>/dev/null; then
  echo "fuzz: clang++ cannot link libFuzzer here (apt-get install libclang-rt-14-dev); skipping" \
    "the libFuzzer run (the corpus replay ran in CTest)"
  exit 0
fi
# SECONDS split between the two, so together they never fuzz for longer (libFuzzer reads 0 as
# "forever", so a target left 0 s is not run).
readers_seconds=$(((seconds + 1) / 2))
arguments_seconds=$((seconds - readers_seconds))

cp "$root"/tests/fuzz/corpus/* "$root"/resources/plans/* "$root"/tests/data/megatron_examples/*.sh \
  "$out/corpus/" 2>/dev/null || true
cp "$root"/tests/fuzz/corpus_arguments/* "$out/corpus_arguments/" 2>/dev/null || true
sources=$(ls "$root"/engine/*.cpp "$root"/engine/generators/*.cpp "$root"/engine/model/*.cpp)
# shellcheck disable=SC2086
clang++ "${flags[@]}" $sources "$build/resources/embedded_resources.cpp" \
  "$root/tests/fuzz/fuzz_readers.cpp" -lz -o "$out/fuzz_readers"
clang++ "${flags[@]}" "$root/engine/cli/arguments.cpp" "$root/engine/option_values.cpp" \
  "$root/tests/fuzz/fuzz_arguments.cpp" \
  -o "$out/fuzz_arguments"

"$out/fuzz_readers" -max_total_time="$readers_seconds" -max_len=65536 -timeout=10 \
  -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$out/readers-" "$out/corpus" 2>&1 |
  tail -n 12
echo "fuzz: $readers_seconds s of libFuzzer on the plan, trace, schedule and CSV readers found no crash"
if ((arguments_seconds > 0)); then
  "$out/fuzz_arguments" -max_total_time="$arguments_seconds" -max_len=4096 -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$out/arguments-" \
    "$out/corpus_arguments" 2>&1 | tail -n 12
  echo "fuzz: $arguments_seconds s of libFuzzer on the CLI's argument parser found no crash"
fi
