#!/bin/sh
# Builds the wire decoder target (wire_target.h) for libFuzzer with Debian's clang, with
# ASan and UBSan: the same sources as the fuzz_wire driver in tests/fuzz/CMakeLists.txt.
# Usage: tests/fuzz/build_libfuzzer.sh OUTPUT   (run from anywhere; needs clang and
# libclang-rt-dev, libzmq3-dev, libsodium-dev, cppzmq-dev)
# Then: OUTPUT -max_total_time=600 CORPUS_DIR   (see docs/RELIABILITY.md)
set -eu
out=${1:?usage: build_libfuzzer.sh OUTPUT}
src=$(cd "$(dirname "$0")/../.." && pwd)
cxx=${CXX_FUZZ:-clang++}
# kernels.cc (reached only through the Array destructor the wire buffers name) asks for
# __builtin_cpu_supports("f16c"), which clang 14 does not know: it is compiled by g++.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The feature header CMake generates (cmake/kvstore_features.h.in), for a CPU build with the
# parameter server.
sed -e 's/@KVSTORE_FEATURE_CUDA@/0/' -e 's/@KVSTORE_FEATURE_NCCL@/0/' -e 's/@KVSTORE_FEATURE_DIST@/1/' \
  "$src/cmake/kvstore_features.h.in" >"$tmp/kvstore_features.h"
g++ -std=c++17 -O2 -I"$src/src" -I"$tmp" -I"$src/include" -c "$src/src/core/cpu/kernels.cc" -o "$tmp/kernels.o"
# shellcheck disable=SC2046
$cxx -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I"$src/src" -I"$tmp" -I"$src/include" \
  "$src/tests/fuzz/fuzz_wire_libfuzzer.cc" "$src/tests/fuzz/wire_target.cc" \
  "$src"/src/ps/config.cc "$src"/src/ps/log.cc "$src"/src/ps/node_table.cc \
  "$src"/src/ps/placement.cc "$src"/src/ps/security.cc "$src"/src/ps/transport.cc \
  "$src"/src/ps/wire.cc "$src/src/optimizer/spec.cc" \
  "$src/src/core/array.cc" "$src/src/core/device_cpu.cc" "$src/src/core/dtype.cc" \
  "$src/src/core/error.cc" "$tmp/kernels.o" "$src/src/core/cpu/worker_pool.cc" \
  $(pkg-config --cflags --libs libzmq libsodium) -lpthread -o "$out"
