#!/usr/bin/env bash
# Installs what pipescope needs on Debian 12 / Ubuntu, skipping packages already present.
# The CUDA toolkit and NCCL are optional and never installed here: the backend's GPU device is
# built only where they already exist.
set -euo pipefail
packages=(build-essential cmake ninja-build pkg-config
          qt6-base-dev qt6-charts-dev libgl-dev libxkbcommon-dev
          nlohmann-json3-dev libopenmpi-dev openmpi-bin
          zlib1g-dev # gzip-streamed traces (any output named *.gz) and reading them back
          xvfb xauth clang clang-tidy clang-format)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "pipescope: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
