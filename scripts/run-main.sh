#!/bin/sh
# Builds kvstore with the Python binding and the distributed stores, then runs the main job
# (examples/train): an MLP with 1.1 M parameters (64-1024-1024-10) trained on the 8x8
# handwritten digits by 2 workers and 2 parameter servers started by kvstore-launch on this
# machine. The servers run the optimizer (set_optimizer); the 1024x1024 weight is split by
# rows over both servers, the other keys are spread over them. Rank 0 prints a line per
# epoch (loss, accuracy, samples/s, step time and the store's share of it). The same
# training then runs in one process, and check_train.py checks that both agree, prints the
# time per step of both and the share of a step spent inside push and pull, and draws the
# loss and accuracy curves into BUILD/train_digits.png. The distributed run is profiled:
# BUILD/train_digits.profile.json is its merged timeline (scheduler, servers, workers).
# Usage: scripts/run-main.sh [build-dir] [check_train.py options...]   (default: ./build-main)
set -eu
cd "$(dirname "$0")/.."
build=build-main
case "${1:-}" in
  ""|-*) ;;
  *) build=$1; shift ;;
esac
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE=/usr/bin/python3 >/dev/null
cmake --build "$build" -j"$(nproc)"
case "$build" in
  /*) png=$build/train_digits.png ;;
  *) png=$(pwd)/$build/train_digits.png ;;
esac

# The profiler (KVSTORE_PROFILE, include/kvstore/kvstore.h): check_train.py sets it for the
# distributed run only; every node writes its Chrome-trace timeline and kvstore-launch
# merges them, on one clock, into this file (one process per node).
profile=${png%.png}.profile.json

./examples/train/run.sh "$build" --epochs 5 --plot "$png" --profile "$profile" "$@"
echo "run-main: loss and accuracy curves: $png"
echo "run-main: merged timeline of the distributed run (chrome://tracing or ui.perfetto.dev):" \
     "$profile"
