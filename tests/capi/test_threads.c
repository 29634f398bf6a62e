/* test_threads.c - one store driven from several threads at once: a shared key updated by
 * every thread (no lost update), private keys per thread, and concurrent pulls that must
 * never observe a half-written value; and freeing a store or array while a call on it runs
 * (refused with BUSY, from another thread or from the store's own updater). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>

#include "../common/arrays.h"

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

/* ---- freeing handles while a call on them runs ---- */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_in_updater, g_main_done;
static KVArrayHandle g_pushed;
static int g_self_free_rc, g_self_array_rc, g_borrowed_free_rc;

/* Runs inside the push: tries to free its own store and the pushed array (both refused),
 * then holds the push open until the main thread has tried the same from outside. */
static int blocking_updater(int key, KVArrayHandle recv, KVArrayHandle stored, void* user_data) {
  (void)key;
  KVStoreHandle self = (KVStoreHandle)user_data;
  g_self_free_rc = KVStoreFree(self);
  g_self_array_rc = KVArrayFree(g_pushed);
  g_borrowed_free_rc = KVArrayFree(recv);
  pthread_mutex_lock(&g_mu);
  g_in_updater = 1;
  pthread_cond_broadcast(&g_cv);
  while (!g_main_done) pthread_cond_wait(&g_cv, &g_mu);
  pthread_mutex_unlock(&g_mu);
  return KVArrayCopy(stored, recv);
}

static void* push_once(void* arg) {
  KVStoreHandle kv = (KVStoreHandle)arg;
  const int key = 7;
  return (void*)(long)KVStorePush(kv, 1, &key, &g_pushed, 0);
}

static void test_free_during_call(void) {
  KVStoreHandle kv = NULL;
  CHECK_OK(KVStoreCreate("local", &kv));
  int64_t n = 16;
  KVArrayHandle out = NULL;
  CHECK_OK(KVArrayCreate(&n, 1, KV_FLOAT32, KV_CPU, 0, &out));
  CHECK_OK(KVArrayCreate(&n, 1, KV_FLOAT32, KV_CPU, 0, &g_pushed));
  const int key = 7;
  CHECK_OK(KVStoreInit(kv, 1, &key, &out));
  CHECK_OK(KVStoreSetUpdater(kv, blocking_updater, kv, NULL));
  CHECK_OK(KVArrayFill(g_pushed, 5));

  pthread_t pusher;
  pthread_create(&pusher, NULL, push_once, kv);
  pthread_mutex_lock(&g_mu);
  while (!g_in_updater) pthread_cond_wait(&g_cv, &g_mu);
  pthread_mutex_unlock(&g_mu);
  /* The push is running on the other thread: freeing its store or its value is refused. */
  CHECK_ERR(KVStoreFree(kv), KV_ERR_BUSY, "in use by 1 call");
  CHECK_ERR(KVArrayFree(g_pushed), KV_ERR_BUSY, "array is in use");
  pthread_mutex_lock(&g_mu);
  g_main_done = 1;
  pthread_cond_broadcast(&g_cv);
  pthread_mutex_unlock(&g_mu);
  void* push_rc = NULL;
  pthread_join(pusher, &push_rc);
  CHECK((long)push_rc == 0);
  CHECK(g_self_free_rc == KV_ERR_BUSY);
  CHECK(g_self_array_rc == KV_ERR_BUSY);
  CHECK(g_borrowed_free_rc == KV_ERR_INVALID_ARGUMENT);

  /* Both handles stayed usable: the push landed and can be pulled, then freed for real. */
  float got[16];
  CHECK_OK(KVStorePull(kv, 1, &key, &out, 0));
  CHECK_OK(KVArrayCopyToHost(out, got, sizeof got));
  CHECK(got[0] == 5.0f && got[15] == 5.0f);
  CHECK_OK(KVArrayFree(g_pushed));
  CHECK_OK(KVArrayFree(out));
  CHECK_OK(KVStoreFree(kv));
}

int main(void) {
  test_free_during_call();

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
