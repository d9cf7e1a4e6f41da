#!/usr/bin/env bash
# Installs what is missing, builds, and opens the explorer on the built-in example plan. With no
# display it renders the window to a PNG instead and prints where. Extra arguments go to
# pipescope-gui (e.g. --plan FILE).
set -euo pipefail
cd "$(dirname "$0")"
bash .ci/install-deps.sh
source .ci/configure.sh
configure build -DCMAKE_BUILD_TYPE=Release
if ! grep -q '^PIPESCOPE_GUI_CONFIGURED:INTERNAL=ON' build/CMakeCache.txt; then
  echo "pipescope: the explorer was not configured (Qt 6 Widgets or Charts missing; see the" \
    "configure output above); install qt6-base-dev qt6-charts-dev libqt6opengl6-dev" >&2
  exit 2
fi
cmake --build build -j2 --target pipescope pipescope-gui
if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
  exec build/gui/pipescope-gui "$@"
fi
shot="$PWD/build/pipescope-explorer.png"
QT_QPA_PLATFORM=offscreen build/gui/pipescope-gui --screenshot "$shot" "$@"
echo "No display: the explorer window was rendered to $shot"
