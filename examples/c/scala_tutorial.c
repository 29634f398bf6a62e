/* The Scala KVStore tutorial (shared/seeds/scala-kvstore.md) in C. */
#include "example_util.h"

int main(void) {
  KVStoreHandle kv;
  TRY(KVStoreCreate("local", &kv));
  int k3 = 3, gpu = gpu_or_cpu(4);
  KVArrayHandle v = ones(2), a = ones(0);
  TRY(KVStoreInit(kv, 1, &k3, &v));
  TRY(KVStorePull(kv, 1, &k3, &a, 0));
  print_scala(a);
  KVArrayHandle e = ones(8);
  TRY(KVStorePush(kv, 1, &k3, &e, 0));
  TRY(KVStorePull(kv, 1, &k3, &a, 0));
  print_scala(a);
  KVArrayHandle b[4];
  int k3x4[4] = {3, 3, 3, 3};
  for (int i = 0; i < 4; ++i) b[i] = ones_ctx(1, gpu, i);
  TRY(KVStorePush(kv, 4, k3x4, b, 0));
  TRY(KVStorePull(kv, 1, &k3, &a, 0));
  print_scala(a);
  ScaledUpdater upd = {2.0, "update on key %d\n"};
  TRY(KVStoreSetUpdater(kv, scaled_update, &upd, NULL));
  TRY(KVStorePull(kv, 1, &k3, &a, 0));
  print_scala(a);
  KVArrayHandle one = ones(1);
  TRY(KVStorePush(kv, 1, &k3, &one, 0));
  TRY(KVStorePull(kv, 1, &k3, &a, 0));
  print_scala(a);
  for (int i = 0; i < 4; ++i) TRY(KVArrayFill(b[i], 1));
  TRY(KVStorePull(kv, 4, k3x4, b, 0));
  print_scala(b[1]);
  int keys[3] = {5, 7, 9};
  KVArrayHandle l[3] = {ones(1), ones(1), ones(1)}, z[3] = {ones(0), ones(0), ones(0)};
  TRY(KVStoreInit(kv, 3, keys, l));
  upd.fmt = "update on key: %d\n";
  TRY(KVStorePush(kv, 3, keys, l, 0));
  TRY(KVStorePull(kv, 3, keys, z, 0));
  print_scala(z[1]);
  KVArrayFree(v), KVArrayFree(a), KVArrayFree(e), KVArrayFree(one);
  for (int i = 0; i < 4; ++i) KVArrayFree(b[i]);
  for (int i = 0; i < 3; ++i) KVArrayFree(l[i]), KVArrayFree(z[i]);
  return KVStoreFree(kv);
}
