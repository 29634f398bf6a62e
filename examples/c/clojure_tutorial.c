/* The Clojure KVStore tutorial (shared/seeds/clojure-kvstore.md) in C: string keys. */
#include "example_util.h"

int main(void) {
  KVStoreHandle kv;
  TRY(KVStoreCreate("local", &kv));
  const char* k3 = "3";
  KVArrayHandle v = ones(2), a = ones(0);
  TRY(KVStoreInitStr(kv, 1, &k3, &v));
  TRY(KVStorePullStr(kv, 1, &k3, &a, 0));
  print_clojure(a), printf("\n");
  KVArrayHandle e = ones(8);
  TRY(KVStorePushStr(kv, 1, &k3, &e, 0));
  TRY(KVStorePullStr(kv, 1, &k3, &a, 0));
  print_clojure(a), printf("\n");
  KVArrayHandle b[3] = {ones_ctx(1, KV_CPU, 0), ones_ctx(1, KV_CPU, 1), ones_ctx(1, KV_CPU, 2)};
  const char* k3x3[3] = {"3", "3", "3"};
  TRY(KVStorePushStr(kv, 3, k3x3, b, 0));
  TRY(KVStorePullStr(kv, 1, &k3, &a, 0));
  print_clojure(a), printf("\n");
  KVArrayHandle two[2] = {ones_ctx(1, KV_CPU, 0), ones_ctx(1, KV_CPU, 1)};
  TRY(KVStorePullStr(kv, 2, k3x3, two, 0));
  printf("("), print_clojure(two[0]), printf(" "), print_clojure(two[1]), printf(")\n");
  const char* ks[3] = {"5", "7", "9"};
  KVArrayHandle l[3] = {ones(1), ones(1), ones(1)}, z[3] = {ones(0), ones(0), ones(0)};
  TRY(KVStoreInitStr(kv, 3, ks, l));
  TRY(KVStorePushStr(kv, 3, ks, l, 0));
  TRY(KVStorePullStr(kv, 3, ks, z, 0));
  printf("("), print_clojure(z[0]), printf(" "), print_clojure(z[1]), printf(" "), print_clojure(z[2]), printf(")\n");
  KVArrayFree(v), KVArrayFree(a), KVArrayFree(e), KVArrayFree(two[0]), KVArrayFree(two[1]);
  for (int i = 0; i < 3; ++i) KVArrayFree(b[i]), KVArrayFree(l[i]), KVArrayFree(z[i]);
  return KVStoreFree(kv);
}
