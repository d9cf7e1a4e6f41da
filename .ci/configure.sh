# Sourced by run.sh and test.sh: `configure DIR CMAKE_ARGS...` configures DIR with Ninja. A
# configure that fails leaves no cache behind, so the next try (after installing what it named)
# starts clean instead of tripping over the half-made build folder.
configure() {
  local dir=$1
  shift
  mkdir -p "$dir"
  if ! cmake -S . -B "$dir" -G Ninja "$@" >"$dir/configure.log" 2>&1; then
    cat "$dir/configure.log" >&2
    rm -rf "$dir/CMakeCache.txt" "$dir/CMakeFiles"
    echo "pipescope: configuring $dir failed (above); nothing was built" >&2
    exit 2
  fi
  grep '^-- pipescope:' "$dir/configure.log" || true
}
