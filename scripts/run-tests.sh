#!/bin/sh
# Builds kvstore and runs every test suite:
#  1. the default configuration (CUDA paths compiled and linked when nvcc exists; GPU tests
#     skip themselves without a GPU) with every binding: the whole ctest suite;
#  2. the core, unit and distributed suites again under ASan+UBSan, and the Python binding's
#     suite against that library;
#  3. the threaded stress tests under TSan, with the distributed cases whose threads hand
#     arrays to each other (zero-copy push/pull, a killed server, a sync job) and the
#     in-process jobs (scheduler, servers and workers as threads of one process), and the
#     profiler's (threads recording while it stops; a profiled job).
# Usage: scripts/run-tests.sh [build-root]   (default: ./build-ci)
set -eu
cd "$(dirname "$0")/.."
root=${1:-build-ci}
jobs=$(nproc)
py=/usr/bin/python3

echo "== default build ($root/default)"
cmake -S . -B "$root/default" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython3_EXECUTABLE=$py >/dev/null
cmake --build "$root/default" -j"$jobs"
ctest --test-dir "$root/default" --output-on-failure -j"$jobs" --timeout 600

echo "== ASan+UBSan build ($root/asan)"
cmake -S . -B "$root/asan" -DCMAKE_BUILD_TYPE=Debug -DKVSTORE_SANITIZE=address,undefined \
  -DKVSTORE_USE_CUDA=OFF -DKVSTORE_BUILD_BINDINGS=OFF -DKVSTORE_BUILD_BENCH=OFF \
  -DPython3_EXECUTABLE=$py >/dev/null
cmake --build "$root/asan" -j"$jobs"
# Tests whose processes are Python interpreters (python, train) are left out here: an
# interpreter cannot load an ASan-instrumented library unless the ASan runtime is preloaded.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  ctest --test-dir "$root/asan" --output-on-failure -j"$jobs" -L 'core|unit|dist' -LE 'install|seeds|train' \
  -E 'python' --timeout 600

# The Python binding's suite (pure Python over ctypes) against the ASan+UBSan library: the
# interpreter gets the ASan runtime, and libstdc++ for its exception interceptor, preloaded;
# leak detection is off (the interpreter itself keeps memory until exit).
echo "== Python binding against the ASan+UBSan library"
LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libstdc++.so)" \
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  KVSTORE_LIBRARY="$PWD/$root/asan/libkvstore.so.0" PYTHONPATH="$PWD/bindings/python" \
  $py -m pytest -q -p no:cacheprovider bindings/python/tests

echo "== TSan build ($root/tsan)"
cmake -S . -B "$root/tsan" -DCMAKE_BUILD_TYPE=Debug -DKVSTORE_SANITIZE=thread \
  -DKVSTORE_USE_CUDA=OFF -DKVSTORE_BUILD_BINDINGS=OFF -DKVSTORE_BUILD_BENCH=OFF \
  -DKVSTORE_BUILD_EXAMPLES=OFF -DPython3_EXECUTABLE=$py >/dev/null
cmake --build "$root/tsan" -j"$jobs" --target test_capi_threads test_capi_store test_unit_reduce test_profile test_unit_local_keys test_unit_arg_gates
tsan_tests='capi_threads|capi_store|unit_reduce|profile_local|unit_local_keys|unit_arg_gates'
if grep -qs dist_zerocopy "$root/tsan/tests/dist/CTestTestfile.cmake"; then
  cmake --build "$root/tsan" -j"$jobs" --target dist_worker kvstore-server test_ps_send_queue \
    inprocess_tests profile_worker test_shm test_ps_spin test_ps_ring_intake test_ps_op_tracker
  tsan_tests="$tsan_tests|dist_zerocopy|dist_sync_w2_s2\$|dist_killed_server|unit_ps_send_queue|inprocess_|profile_dist|unit_shm|dist_shm_w2_s2|unit_ps_spin|unit_ps_ring_intake|unit_ps_op_tracker"
fi
# Debian's libzmq is not instrumented: its internal synchronisation is suppressed.
TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/tests/dist/tsan.supp" \
  ctest --test-dir "$root/tsan" --output-on-failure -R "$tsan_tests" --timeout 600
echo "run-tests: all suites passed"
