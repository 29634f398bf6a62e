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
extra=""
[ -f "$src/src/dist/security.cc" ] && extra="$src/src/dist/security.cc"
# reduce_cpu.cc (reached only through the Array destructor the wire buffers name) asks for
# __builtin_cpu_supports("f16c"), which clang 14 does not know: it is compiled by g++.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
g++ -std=c++17 -O2 -I"$src/src" -I"$src/include" -c "$src/src/comm/cpu/reduce_cpu.cc" -o "$tmp/reduce_cpu.o"
# shellcheck disable=SC2046
$cxx -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I"$src/src" -I"$src/include" \
  "$src/tests/fuzz/fuzz_wire_libfuzzer.cc" "$src/tests/fuzz/wire_target.cc" \
  "$src/src/dist/common.cc" "$src/src/optimizer/spec.cc" "$src/src/core/array.cc" \
  "$src/src/core/device_cpu.cc" "$src/src/core/dtype.cc" "$src/src/core/error.cc" \
  "$tmp/reduce_cpu.o" "$src/src/comm/cpu/worker_pool.cc" $extra \
  $(pkg-config --cflags --libs libzmq libsodium) -lpthread -o "$out"
