/* A minimal program built against an installed kvstore: init, push two values, pull. */
#include <kvstore/kvstore.h>
#include <stdio.h>

int main(void) {
  KVStoreHandle kv = NULL;
  KVArrayHandle a = NULL, b = NULL;
  int64_t n = 4;
  int keys[2] = {1, 1};
  float out[4];
  if (KVStoreCreate("local", &kv) || KVArrayCreate(&n, 1, KV_FLOAT32, KV_CPU, 0, &a) ||
      KVArrayCreate(&n, 1, KV_FLOAT32, KV_CPU, 1, &b) || KVArrayFill(a, 2) || KVArrayFill(b, 3) ||
      KVStoreInit(kv, 1, keys, &a)) {
    fprintf(stderr, "setup failed: %s\n", KVGetLastError());
    return 1;
  }
  KVArrayHandle vals[2] = {a, b};
  if (KVStorePush(kv, 2, keys, vals, 0) || KVStorePull(kv, 1, keys, &a, 0) ||
      KVArrayCopyToHost(a, out, sizeof out)) {
    fprintf(stderr, "push/pull failed: %s\n", KVGetLastError());
    return 1;
  }
  printf("consumer: %s sum=%g\n", KVGetVersionString(), out[0]);
  KVArrayFree(a);
  KVArrayFree(b);
  KVStoreFree(kv);
  return out[0] == 5.0f ? 0 : 1;
}
