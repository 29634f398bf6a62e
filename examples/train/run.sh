#!/bin/sh
# run.sh - runs the data-parallel training job on the handwritten digits: 2 workers and 2
# parameter servers started by kvstore-launch on this machine, then the same training in one
# process (store `local`), and compares the two (accuracy bound and agreement; see
# check_train.py), then prints the time per step of both and the store's share of it.
# Builds nothing.
#
#   examples/train/run.sh [BUILD_DIR] [check_train.py options...]
#
# BUILD_DIR (default: build) holds libkvstore.so and tools/kvstore-launch. Options pass on,
# e.g. --workers 3 --servers 1 --epochs 30 --optimizer adam --lr 0.01 --plot curves.png
# --hidden 128,128 --model softmax.
# Needs /usr/bin/python3 with numpy and the Debian package python3-sklearn (for the data),
# and python3-matplotlib for --plot.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=build
case "${1:-}" in
  ""|-*) ;;
  *) build=$1; shift ;;
esac
case "$build" in
  /*) ;;
  *) build=$(pwd)/$build ;;
esac
lib=$build/libkvstore.so
if [ ! -e "$lib" ]; then
  echo "run.sh: $lib not found; build first (cmake -S $src -B $build && cmake --build $build)" >&2
  exit 2
fi
launcher=
for cand in "$build/tools/kvstore-launch" "$src/tools/kvstore-launch"; do
  if [ -x "$cand" ]; then launcher=$cand; break; fi
done
if [ -z "$launcher" ]; then
  echo "run.sh: no kvstore-launch in $build/tools or $src/tools (a build without the" \
       "distributed stores?)" >&2
  exit 2
fi
exec /usr/bin/python3 "$here/check_train.py" --library "$lib" --launcher "$launcher" \
  --workers 2 --servers 2 "$@"
