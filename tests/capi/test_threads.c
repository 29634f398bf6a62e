/* test_threads.c - one store driven from several threads at once: a shared key updated by
 * every thread (no lost update), private keys per thread, and concurrent pulls that must
 * never observe a half-written value. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>

#include "test_helpers.h"

enum { kThreads = 6, kRounds = 400, kElems = 4096 };

static KVStoreHandle g_kv;
static int g_failures[kThreads];

static int accumulate(int key, KVArrayHandle recv, KVArrayHandle stored, void* user_data) {
  (void)key;
  (void)user_data;
  return KVArrayBinary(KV_OP_ADD, stored, recv, stored);
}

/* 1 when all kElems int64 elements of `a` are equal (a torn value would mix two). */
static int uniform(KVArrayHandle a, int64_t* first) {
  static __thread int64_t buf[kElems];
  if (KVArrayCopyToHost(a, buf, sizeof buf) != 0) return 0;
  for (int i = 1; i < kElems; ++i) {
    if (buf[i] != buf[0]) return 0;
  }
  *first = buf[0];
  return 1;
}

static void* worker(void* arg) {
  const int t = (int)(long)arg;
  int64_t n = kElems;
  KVArrayHandle one = NULL, out = NULL;
  KVArrayCreate(&n, 1, KV_INT64, KV_CPU, t, &one);
  KVArrayCreate(&n, 1, KV_INT64, KV_CPU, t, &out);
  KVArrayFill(one, 1);
  const int shared = 0, mine = 100 + t;
  int64_t last_seen = -1;
  for (int r = 0; r < kRounds; ++r) {
    int keys[2] = {shared, mine};
    KVArrayHandle vals[2] = {one, one};
    if (KVStorePush(g_kv, 2, keys, vals, 0) != 0) g_failures[t]++;
    int64_t v = 0;
    if (KVStorePull(g_kv, 1, &shared, &out, 0) != 0 || !uniform(out, &v) || v <= last_seen) g_failures[t]++;
    last_seen = v; /* the shared value only grows */
    if (KVStorePull(g_kv, 1, &mine, &out, 0) != 0 || !uniform(out, &v) || v != r + 1) g_failures[t]++;
  }
  KVArrayFree(one);
  KVArrayFree(out);
  return NULL;
}

int main(void) {
  CHECK_OK(KVStoreCreate("local", &g_kv));
  int64_t n = kElems;
  KVArrayHandle zero = NULL;
  KVArrayCreate(&n, 1, KV_INT64, KV_CPU, 0, &zero);
  int keys[kThreads + 1];
  KVArrayHandle vals[kThreads + 1];
  keys[0] = 0;
  vals[0] = zero;
  for (int t = 0; t < kThreads; ++t) keys[t + 1] = 100 + t, vals[t + 1] = zero;
  CHECK_OK(KVStoreInit(g_kv, kThreads + 1, keys, vals));
  CHECK_OK(KVStoreSetUpdater(g_kv, accumulate, NULL, NULL));

  pthread_t threads[kThreads];
  for (long t = 0; t < kThreads; ++t) pthread_create(&threads[t], NULL, worker, (void*)t);
  for (int t = 0; t < kThreads; ++t) pthread_join(threads[t], NULL);
  for (int t = 0; t < kThreads; ++t) CHECK(g_failures[t] == 0);

  int64_t total = 0;
  int shared = 0;
  CHECK_OK(KVStorePull(g_kv, 1, &shared, &zero, 0));
  CHECK(uniform(zero, &total));
  CHECK(total == (int64_t)kThreads * kRounds); /* no lost update */
  KVArrayFree(zero);
  KVStoreFree(g_kv);
  return check_summary();
}
