#!/usr/bin/env bash
# clang-tidy (the checks in .clang-tidy, findings are errors) over the engine's, the backend's and
# the GUI's sources, using the compile commands of BUILD_DIR. The engine is the part every face
# depends on; the backend is checked in the files that build without CUDA (its cpu device, launch,
# events, trace), those the compile commands hold (cpu_device.cpp and mpi_channel.cpp only where
# MPI is).
#   usage: .ci/clang-tidy.sh BUILD_DIR
set -euo pipefail
build=${1:-build}
root="$(cd "$(dirname "$0")/.." && pwd)"
if ! command -v clang-tidy >/dev/null; then
  echo "clang-tidy: not installed; skipped"
  exit 0
fi
cd "$root"
tidy() { xargs -r -P2 -n4 clang-tidy -p "$build" --quiet --extra-arg=-Wno-unknown-warning-option; }
ls engine/*.cpp engine/*/*.cpp | tidy
echo "clang-tidy: engine clean"
# The backend's CUDA files (cuda_device.cpp, shared_gpu_device.cpp, gemm_bench_cuda.cpp) need the
# CUDA headers, which a machine without the toolkit lacks.
for file in backend/*.cpp; do
  case "$file" in
  backend/cuda_device.cpp | backend/shared_gpu_device.cpp | backend/gemm_bench_cuda.cpp) ;;
  *) if grep -q "\"file\": *\"$root/$file\"" "$build/compile_commands.json"; then echo "$file"; fi ;;
  esac
done | tidy
echo "clang-tidy: backend clean"
# The kernels (kernels/): the CPU ones always, the CUDA ones where the compile commands hold
# them (a build with the CUDA toolkit); the .cu files are device code, not checked here.
for file in kernels/*.cpp; do
  if grep -q "\"file\": *\"$root/$file\"" "$build/compile_commands.json"; then echo "$file"; fi
done | tidy
echo "clang-tidy: kernels clean"
# The explorer (gui/): every library folder and the app, same checks, findings are errors.
ls gui/*.cpp gui/*/*.cpp | tidy
echo "clang-tidy: gui clean"
