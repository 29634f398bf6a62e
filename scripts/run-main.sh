#!/bin/sh
# Builds kvstore with the Python binding and the distributed stores, then runs the main job:
# a data-parallel training run (examples/train) with 2 workers and 1 server started by
# kvstore-launch on this machine.
# Usage: scripts/run-main.sh [build-dir]   (default: ./build-main)
set -eu
cd "$(dirname "$0")/.."
build=${1:-build-main}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE=/usr/bin/python3 >/dev/null
cmake --build "$build" -j"$(nproc)"
exec ./examples/train/run.sh "$build"
