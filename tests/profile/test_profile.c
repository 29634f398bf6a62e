/* test_profile.c - the profiler through the C ABI (KVProfileStart/Stop/GetStats,
 * docs/PROFILING.md) on an in-process store: the per-key counters of pushes, pulls and
 * pushpulls (bytes, applies), the size protocol of KVProfileGetStats, refusals (a second
 * start, an unwritable folder), and threads pushing while another reads the counters and
 * the profiler stops under them.
 * Usage: test_profile DIR - writes DIR/local.json and DIR/threads.json, which
 * check_profile.py then reads as JSON. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>

#include "../common/arrays.h"

enum { kElems = 1024, kThreads = 4, kRounds = 200 };

static KVStoreHandle g_kv;
static int g_stop_readers; /* atomic (__atomic builtins) */

/* The counters as a malloc'ed string (the two-step size protocol; a call between the two
 * steps may add keys, and the second step then asks for more). */
static char* stats(void) {
  for (;;) {
    size_t need = 0;
    CHECK_ERR(KVProfileGetStats(NULL, 0, &need), KV_ERR_INVALID_ARGUMENT, "the stats need");
    CHECK(need > 1);
    char* buf = malloc(need);
    size_t again = 0;
    const int rc = KVProfileGetStats(buf, need, &again);
    if (rc == 0) {
      CHECK(again == need && strlen(buf) + 1 == need);
      return buf;
    }
    CHECK_MSG(rc == KV_ERR_INVALID_ARGUMENT && again > need, "%d: %s", rc, KVGetLastError());
    free(buf);
  }
}

static void expect_in(const char* haystack, const char* needle) {
  CHECK_MSG(strstr(haystack, needle) != NULL, "'%s' not in %s", needle, haystack);
}

static void* pusher(void* arg) {
  const int key = 10 + (int)(long)arg;
  int64_t n = kElems;
  KVArrayHandle v = NULL;
  REQUIRE_OK(KVArrayCreate(&n, 1, KV_FLOAT32, KV_CPU, 0, &v));
  REQUIRE_OK(KVArrayFill(v, 1));
  for (int r = 0; r < kRounds; ++r) {
    CHECK_OK(KVStorePush(g_kv, 1, &key, &v, 0));
    CHECK_OK(KVStorePull(g_kv, 1, &key, &v, 0));
  }
  KVArrayFree(v);
  return NULL;
}

static void* reader(void* arg) {
  (void)arg;
  while (!__atomic_load_n(&g_stop_readers, __ATOMIC_ACQUIRE)) free(stats());
  return NULL;
}

int main(int argc, char** argv) {
  REQUIRE(argc == 2, "usage: test_profile DIR");
  char path[4096];
  size_t need = 0;

  /* Before any run: no keys, not running. */
  char* s = stats();
  expect_in(s, "\"running\":false");
  expect_in(s, "\"keys\":[]");
  free(s);
  CHECK_ERR(KVProfileGetStats(NULL, 0, NULL), KV_ERR_NULL_POINTER, "out_size");
  CHECK_ERR(KVProfileGetStats(NULL, 8, &need), KV_ERR_NULL_POINTER, "buf");
  CHECK_ERR(KVProfileStart("/nonexistent-folder/t.json"), KV_ERR_INVALID_ARGUMENT, "not writable");
  CHECK_OK(KVProfileStop()); /* nothing runs: nothing to do */

  snprintf(path, sizeof path, "%s/local.json", argv[1]);
  REQUIRE_OK(KVProfileStart(path));
  CHECK_ERR(KVProfileStart(path), KV_ERR_INVALID_ARGUMENT, "already runs");
  REQUIRE_OK(KVStoreCreate("local", &g_kv));
  REQUIRE_OK(KVStoreSetOptimizer(g_kv, "sgd(learning_rate=0.1)"));
  int64_t n = kElems;
  KVArrayHandle a = NULL, b = NULL;
  REQUIRE_OK(KVArrayCreate(&n, 1, KV_FLOAT32, KV_CPU, 0, &a));
  REQUIRE_OK(KVArrayCreate(&n, 1, KV_FLOAT32, KV_CPU, 0, &b));
  KVArrayFill(a, 1);
  const int keys[2] = {3, 7};
  KVArrayHandle vals[2] = {a, b};
  REQUIRE_OK(KVStoreInit(g_kv, 2, keys, vals));
  CHECK_OK(KVStorePush(g_kv, 1, &keys[0], &a, 0));
  CHECK_OK(KVStorePush(g_kv, 1, &keys[0], &a, 0));
  CHECK_OK(KVStorePull(g_kv, 2, keys, vals, 0));
  CHECK_OK(KVStorePushPull(g_kv, 1, &keys[1], &b, 1, &keys[1], &b, 0));
  const int unknown = 99;
  CHECK_ERR(KVStorePush(g_kv, 1, &unknown, &a, 0), KV_ERR_UNKNOWN_KEY, NULL); /* not counted */

  s = stats();
  expect_in(s, "\"running\":true");
  expect_in(s, "{\"key\":3,\"pushes\":2,\"pulls\":1,\"bytes_pushed\":8192,\"bytes_pulled\":4096,");
  expect_in(s, "{\"key\":7,\"pushes\":1,\"pulls\":2,\"bytes_pushed\":4096,\"bytes_pulled\":8192,");
  CHECK_MSG(strstr(s, "\"key\":99") == NULL, "a failed call was counted: %s", s);
  /* Two sgd applies of key 3, one of key 7. */
  expect_in(s, "\"applies\":2");
  expect_in(s, "\"applies\":1");
  free(s);
  CHECK_OK(KVProfileStop());
  s = stats(); /* still readable after the stop */
  expect_in(s, "\"running\":false");
  expect_in(s, "{\"key\":3,\"pushes\":2,");
  free(s);
  FILE* f = fopen(path, "r");
  CHECK_MSG(f != NULL, "%s was not written", path);
  if (f) fclose(f);

  /* Threads push and pull their own keys while another reads the counters; the profiler
   * stops under them, and the counters of a counters-only run start from zero. */
  CHECK_OK(KVProfileStart(NULL));
  s = stats();
  expect_in(s, "\"keys\":[]");
  free(s);
  CHECK_OK(KVProfileStop());
  snprintf(path, sizeof path, "%s/threads.json", argv[1]);
  KVArrayHandle init[kThreads];
  int tkeys[kThreads];
  for (int t = 0; t < kThreads; ++t) {
    tkeys[t] = 10 + t;
    init[t] = a;
  }
  REQUIRE_OK(KVStoreInit(g_kv, kThreads, tkeys, init));
  REQUIRE_OK(KVProfileStart(path));
  pthread_t th[kThreads], rd;
  for (long t = 0; t < kThreads; ++t) pthread_create(&th[t], NULL, pusher, (void*)t);
  pthread_create(&rd, NULL, reader, NULL);
  struct timespec pause = {0, 20 * 1000 * 1000};
  nanosleep(&pause, NULL);
  CHECK_OK(KVProfileStop());
  for (int t = 0; t < kThreads; ++t) pthread_join(th[t], NULL);
  __atomic_store_n(&g_stop_readers, 1, __ATOMIC_RELEASE);
  pthread_join(rd, NULL);

  KVArrayFree(a);
  KVArrayFree(b);
  CHECK_OK(KVStoreFree(g_kv));
  return check_summary();
}
