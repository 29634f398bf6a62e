/* calls.c - see calls.h. */
#include "calls.h"

#include <time.h>

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double kvbench_time_calls(KVStoreHandle store, int op, int num, const int* keys,
                          const KVArrayHandle* arrays, long calls) {
  const double start = now_seconds();
  for (long i = 0; i < calls; ++i) {
    const int rc = op == KVBENCH_PUSH ? KVStorePush(store, num, keys, arrays, 0)
                                      : KVStorePull(store, num, keys, arrays, 0);
    if (rc != 0) return rc;
  }
  return now_seconds() - start;
}
