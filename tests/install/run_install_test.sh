#!/bin/sh
# Installs the build into a scratch prefix, then builds and runs a consumer against it twice:
# through find_package(kvstore) and through pkg-config. The prefix is left for the seed
# harness (test_seeds_dlopen), which dlopens the installed library.
# Usage: run_install_test.sh <build-dir> <source-dir> <prefix> <c-compiler>
set -eu
build=$1 src=$2 prefix=$3 cc=$4
rm -rf "$prefix" "$prefix-consumer"
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(ls -d "$prefix"/lib*/ | head -n 1)
test -f "$prefix/include/kvstore/kvstore.h"
test -f "$libdir/cmake/kvstore/kvstoreConfig.cmake"
test -f "$libdir/pkgconfig/kvstore.pc"

cmake -S "$src/tests/install/consumer" -B "$prefix-consumer" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_COMPILER="$cc" >/dev/null
cmake --build "$prefix-consumer" >/dev/null
LD_LIBRARY_PATH="$libdir" "$prefix-consumer/consumer"

PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --exists kvstore
"$cc" -std=c99 -Wall -Wextra -Werror "$src/tests/install/consumer/main.c" \
  $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs kvstore) -o "$prefix-consumer/consumer-pc"
LD_LIBRARY_PATH="$libdir" "$prefix-consumer/consumer-pc"
echo "install test: find_package and pkg-config consumers passed"
