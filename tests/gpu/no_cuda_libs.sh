#!/bin/sh
# no_cuda_libs.sh LIBKVSTORE PROBE BUILD_DIR CTEST
#
# Proves that the CUDA build of libkvstore needs no CUDA or NCCL library to load and run its
# CPU paths:
#  1. its NEEDED entries name no CUDA/NCCL library and its RPATH/RUNPATH no CUDA directory;
#  2. in a private mount namespace where /etc/ld.so.cache is empty (so the directories that
#     only ld.so.conf adds, such as /usr/local/cuda/lib64, are never searched), any libcuda,
#     libcudart or libnccl in the default directories is covered by an empty file, and
#     LD_LIBRARY_PATH is unset, the probe confirms that none of them can be opened and checks
#     the library's answers (no GPU, clear errors), then the whole CPU suite (ctest -L core)
#     runs.
# Where mount namespaces are not allowed (neither as root nor in a user namespace), step 2
# falls back to running the probe through the dynamic loader with --inhibit-cache (the
# suite needs the namespace, and is then skipped with a note).
set -u
lib=$1 probe=$2 build=$3 ctest=$4

fail() { echo "FAIL: $*"; exit 1; }

command -v readelf >/dev/null 2>&1 || fail "readelf (binutils) is needed"
dyn=$(readelf -d "$lib") || fail "readelf -d $lib"
echo "$dyn" | grep -E 'NEEDED|RPATH|RUNPATH'
if echo "$dyn" | grep NEEDED | grep -Eiq 'cuda|cudart|nccl|cublas'; then
  fail "$lib has a CUDA/NCCL library among its NEEDED entries"
fi
if echo "$dyn" | grep -E 'RPATH|RUNPATH' | grep -iq 'cuda'; then
  fail "$lib has a CUDA directory in its RPATH/RUNPATH"
fi
echo "ok: no CUDA or NCCL library is NEEDED"

unset LD_LIBRARY_PATH LD_PRELOAD
empty=$(mktemp) || fail "mktemp"
trap 'rm -f "$empty"' EXIT

# A private mount namespace: directly as root, or inside a user namespace otherwise.
ns=""
if command -v unshare >/dev/null 2>&1; then
  if unshare -m true 2>/dev/null; then
    ns="-m"
  elif unshare -rm true 2>/dev/null; then
    ns="-rm"
  fi
fi

if [ -n "$ns" ]; then
  # shellcheck disable=SC2016
  unshare $ns sh -c '
    set -u
    mount --bind "$1" /etc/ld.so.cache || exit 90
    # Libraries in the default directories are found without the cache: cover them with the
    # empty file too (a GPU machine has libcuda.so.1 there, and maybe libnccl).
    for d in /lib /lib64 /usr/lib /usr/lib64 /lib/*-linux-gnu /usr/lib/*-linux-gnu; do
      for f in "$d"/libcuda.so* "$d"/libcudart.so* "$d"/libnccl.so*; do
        [ -e "$f" ] || continue
        mount --bind "$1" "$f" || exit 95
      done
    done
    "$2" --expect-hidden-libs || exit 91
    cd "$3" || exit 92
    n=$("$4" -N -L core | sed -n "s/^Total Tests: *//p")
    [ "${n:-0}" -gt 0 ] || { echo "no tests labelled core"; exit 93; }
    echo "running the CPU suite ($n tests) with the CUDA libraries hidden"
    "$4" -L core --output-on-failure || exit 94
  ' sh "$empty" "$probe" "$build" "$ctest"
  rc=$?
  case $rc in
    0) echo "ok: probe and CPU suite pass with the CUDA libraries hidden"; exit 0 ;;
    90) fail "cannot bind-mount over /etc/ld.so.cache" ;;
    91) fail "the probe failed with the CUDA libraries hidden" ;;
    93) fail "no core tests to run" ;;
    95) fail "cannot hide a CUDA library in a default directory" ;;
    94) fail "the CPU suite failed with the CUDA libraries hidden" ;;
    *) fail "namespace run failed ($rc)" ;;
  esac
fi

echo "NOTE: mount namespaces are not available; running the probe with ld.so --inhibit-cache"
interp=$(readelf -l "$probe" | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
[ -x "$interp" ] || fail "cannot find the program interpreter of $probe"
# Search path: the directories of the libraries libkvstore itself resolves to, minus CUDA.
dirs=$(ldd "$lib" | sed -n 's/.*=> \(\/[^ ]*\)\/[^/ ]* .*/\1/p' | grep -vi cuda | sort -u | tr '\n' ':')
"$interp" --inhibit-cache --library-path "$(dirname "$lib"):$dirs" "$probe" --expect-hidden-libs \
  || fail "the probe failed with the CUDA libraries hidden"
echo "ok: probe passes with the CUDA libraries hidden (CPU suite not run: no mount namespace)"
