/* bench_bindings_c.c - the C baseline of the bindings bench (bench/bindings/run.py): the
 * cells every binding's bench measures, with the same protocol, from C.
 *
 *   bench_bindings_c [--reps N] [--seconds S]
 *
 * A "local" store holds key 0 and keys 1..100, each 4 float32. Cells, in turn, --reps
 * rounds of about S seconds of calls each (after a warm-up):
 *   push1 / pull1:     KVStorePush / KVStorePull of key 0 with one array, per call
 *   push100 / pull100: one call with keys 1..100 and 100 arrays, per key
 * Prints one JSON object: {"lang": "c", "push1": [ns, ...], ...}, one figure per round
 * (run.py takes the medians). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calls.h"

#define NKEYS 100

static void check(int rc, const char* what) {
  if (rc != 0) {
    fprintf(stderr, "bench_bindings_c: %s failed: %s\n", what, KVGetLastError());
    exit(1);
  }
}

/* Nanoseconds per call (divided by `per` more: per key) of about `seconds` of calls. */
static double time_cell(KVStoreHandle s, int op, int num, const int* keys,
                        const KVArrayHandle* arrays, double seconds, int per) {
  long calls = 16;
  for (;;) { /* grow the batch until it takes a tenth of the time asked */
    const double t = kvbench_time_calls(s, op, num, keys, arrays, calls);
    if (t < 0) check((int)t, "a timed call");
    if (t >= seconds / 10 || calls > (1L << 30)) {
      const long n = (long)(calls * (seconds / (t > 1e-9 ? t : 1e-9)));
      const double total = kvbench_time_calls(s, op, num, keys, arrays, n > 1 ? n : 1);
      if (total < 0) check((int)total, "a timed call");
      return total / (double)(n > 1 ? n : 1) / per * 1e9;
    }
    calls *= 4;
  }
}

int main(int argc, char** argv) {
  int reps = 7;
  double seconds = 0.2;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
      seconds = atof(argv[++i]);
    } else {
      fprintf(stderr, "usage: bench_bindings_c [--reps N] [--seconds S]\n");
      return 2;
    }
  }
  if (reps < 1) reps = 1;
  KVStoreHandle s = NULL;
  check(KVStoreCreate("local", &s), "KVStoreCreate");
  const int64_t shape[1] = {4};
  const float ones[4] = {1, 1, 1, 1};
  int keys[NKEYS + 1];
  KVArrayHandle arrays[NKEYS + 1];
  for (int i = 0; i <= NKEYS; ++i) {
    keys[i] = i;
    check(KVArrayCreate(shape, 1, KV_FLOAT32, KV_CPU, 0, &arrays[i]), "KVArrayCreate");
    check(KVArrayCopyFromHost(arrays[i], ones, sizeof ones), "KVArrayCopyFromHost");
  }
  check(KVStoreInit(s, NKEYS + 1, keys, arrays), "KVStoreInit");

  static const char* const names[4] = {"push1", "pull1", "push100", "pull100"};
  double* figures = calloc((size_t)reps * 4, sizeof *figures);
  for (int c = 0; c < 4; ++c) /* warm-up */
    time_cell(s, c % 2, c < 2 ? 1 : NKEYS, c < 2 ? keys : keys + 1,
              c < 2 ? arrays : arrays + 1, seconds / 4, 1);
  for (int r = 0; r < reps; ++r)
    for (int c = 0; c < 4; ++c)
      figures[c * reps + r] = time_cell(s, c % 2, c < 2 ? 1 : NKEYS, c < 2 ? keys : keys + 1,
                                        c < 2 ? arrays : arrays + 1, seconds, c < 2 ? 1 : NKEYS);
  printf("{\"lang\": \"c\"");
  for (int c = 0; c < 4; ++c) {
    printf(", \"%s\": [", names[c]);
    for (int r = 0; r < reps; ++r) printf("%s%.2f", r ? ", " : "", figures[c * reps + r]);
    printf("]");
  }
  printf("}\n");
  free(figures);
  for (int i = 0; i <= NKEYS; ++i) KVArrayFree(arrays[i]);
  check(KVStoreFree(s), "KVStoreFree");
  return 0;
}
