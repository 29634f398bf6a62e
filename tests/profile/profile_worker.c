/* profile_worker.c - a worker of the profiled dist job of tests/profile (CMakeLists.txt):
 * three pushpulls of key 5 (1024 float32) on a dist_sync store, then its counters must
 * show them (3 pushes and 3 pulls of 4096 bytes, 3 waits for the round, 4 on rank 0 with its init). The launcher then
 * merges the nodes' timelines, which check_profile.py reads. */
#include "../common/arrays.h"

int main(void) {
  KVStoreHandle kv = NULL;
  REQUIRE_OK(KVStoreCreate("dist_sync", &kv));
  int64_t n = 1024;
  KVArrayHandle v = NULL, out = NULL;
  REQUIRE_OK(KVArrayCreate(&n, 1, KV_FLOAT32, KV_CPU, 0, &v));
  REQUIRE_OK(KVArrayCreate(&n, 1, KV_FLOAT32, KV_CPU, 0, &out));
  REQUIRE_OK(KVArrayFill(v, 1));
  const int key = 5;
  REQUIRE_OK(KVStoreInit(kv, 1, &key, &v));
  for (int r = 0; r < 3; ++r) {
    REQUIRE_OK(KVStorePushPull(kv, 1, &key, &v, 1, &key, &out, 0));
    REQUIRE_OK(KVArrayWaitToRead(out));
  }
  char stats[4096];
  size_t size = 0;
  REQUIRE_OK(KVProfileGetStats(stats, sizeof stats, &size));
  int rank = -1;
  REQUIRE_OK(KVStoreGetRank(kv, &rank));
  char node[32];
  snprintf(node, sizeof node, "\"node\":\"worker %d\"", rank);
  CHECK_MSG(strstr(stats, node) != NULL, "%s not in %s", node, stats);
  /* Rank 0's init is one more wait for the round. */
  const char* rec = strstr(stats, "{\"key\":5,\"pushes\":3,\"pulls\":3,\"bytes_pushed\":12288,"
                                  "\"bytes_pulled\":12288,\"round_waits\":");
  CHECK_MSG(rec != NULL, "%s", stats);
  int waits = 0;
  if (rec != NULL) sscanf(strstr(rec, "\"round_waits\":") + 14, "%d", &waits);
  CHECK_MSG(waits == (rank == 0 ? 4 : 3), "rank %d: %d waits: %s", rank, waits, stats);
  REQUIRE_OK(KVStoreFree(kv));
  KVArrayFree(v);
  KVArrayFree(out);
  return check_summary();
}
