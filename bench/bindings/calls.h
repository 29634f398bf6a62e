/* calls.h - the C side of the bindings bench: the same push and pull calls the bindings make,
 * made from C in a loop. Shared by bench_bindings_c (a process of its own, the baseline of
 * the Java and Perl figures) and libkvbench_calls.so (loaded by the Python bench through
 * ctypes, so that its C figures come from the same process, store and arrays). */
#ifndef KVSTORE_BENCH_BINDINGS_CALLS_H_
#define KVSTORE_BENCH_BINDINGS_CALLS_H_

#include <kvstore/kvstore.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { KVBENCH_PUSH = 0, KVBENCH_PULL = 1 };

/* Seconds taken by `calls` calls of KVStorePush (op KVBENCH_PUSH) or KVStorePull of the
 * `num` keys and arrays given, priority 0, on the steady clock; a negative value (the
 * library's error code) when a call fails. */
__attribute__((visibility("default"))) double kvbench_time_calls(KVStoreHandle store, int op,
                                                                 int num, const int* keys,
                                                                 const KVArrayHandle* arrays,
                                                                 long calls);

#ifdef __cplusplus
}
#endif

#endif /* KVSTORE_BENCH_BINDINGS_CALLS_H_ */
