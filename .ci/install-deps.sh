#!/usr/bin/env bash
# Installs what the README's two commands (run.sh, test.sh) need on Debian 12 or Ubuntu, and only
# that: CI proves the list on a pristine `debootstrap --variant=minbase` root (.ci/run), so
# nothing here may be needed by accident. Packages already present are skipped.
#
# The CUDA toolkit and NCCL are optional and never installed here (they do not come from
# Debian): the backend's GPU devices build only where they already exist, and CMake says so in
# one line. clang, its runtime and clang-tidy/clang-format are installed for test.sh; without
# them the fuzz run and the lint steps say so in one line and are skipped.
#
# When apt cannot install (not root and no sudo, no network, not a Debian system) this prints
# one message naming the packages and the command to install them, and exits 2 before anything
# is configured or built.
set -euo pipefail

packages=(
  # The C++20 compiler, make and dpkg-dev (dpkg-shlibdeps, which `cpack -G DEB` uses to derive
  # the .deb's runtime Depends).
  build-essential
  # file: `cpack -G DEB` (README's Install) runs it on every program to find the shared
  # libraries whose packages become the .deb's Depends.
  file
  # CMake >= 3.25 (CMakeLists.txt) and the Ninja generator run.sh and test.sh use.
  cmake ninja-build
  # Qt 6 Core/Gui/Widgets/Concurrent/Test (the explorer and the QtTest suites). It depends on
  # libgl-dev, which Qt6Gui's CMake package needs, and libqt6gui6 brings the offscreen platform
  # plugin (screenshots without a display) and, through fontconfig, a font.
  qt6-base-dev
  # Qt Charts (memory bars). Its CMake package requires Qt6OpenGL and Qt6OpenGLWidgets, whose
  # development files are only a Recommends of qt6-base-dev: without libqt6opengl6-dev
  # find_package(Qt6 ... Charts) fails and there is no pipescope-gui target.
  qt6-charts-dev libqt6opengl6-dev
  # nlohmann/json and zlib, the engine's dependencies (zlib: gzip-streamed outputs, any name
  # ending in .gz, and reading them back).
  nlohmann-json3-dev zlib1g-dev
  # MPI for the backend's cpu device and mpirun, which the backend tests launch.
  libopenmpi-dev openmpi-bin
)
if [ "${1:-}" = "--test" ]; then
  packages+=(
    # test.sh: .ci/format-check.sh and .ci/clang-tidy.sh.
    clang-format clang-tidy
    # test.sh: tests/fuzz/run-fuzzer.sh builds with clang's libFuzzer and sanitizers, whose
    # runtime libraries are a separate package from clang itself.
    clang libclang-rt-14-dev
  )
fi

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0

install_command="apt-get install --no-install-recommends ${missing[*]}"
give_up() {
  echo "pipescope: $1; install the missing packages, then run this again:" >&2
  echo "  sudo apt-get update && sudo $install_command" >&2
  exit 2
}
command -v apt-get >/dev/null || give_up "apt-get not found (not Debian or Ubuntu?)"
as_root=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || give_up "not root and sudo is not installed"
  as_root=(sudo)
  # With no terminal to type a password into, sudo must not wait for one.
  [ -t 0 ] || as_root=(sudo -n)
fi
echo "pipescope: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! "${as_root[@]}" apt-get update -qq >"$log" 2>&1 ||
  ! "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >>"$log" 2>&1; then
  tail -n 5 "$log" >&2
  give_up "apt-get could not install ${missing[*]} (no network or no permission?)"
fi
