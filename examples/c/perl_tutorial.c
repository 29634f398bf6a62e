/* The Perl KVStore tutorial (shared/seeds/perl-kvstore.md) in C. */
#include "example_util.h"

int main(void) {
  KVStoreHandle kv;
  TRY(KVStoreCreate("local", &kv));
  int k3 = 3;
  KVArrayHandle v = ones(2), a = ones(0);
  TRY(KVStoreInit(kv, 1, &k3, &v));
  TRY(KVStorePull(kv, 1, &k3, &a, 0));
  print_pdl(a);
  KVArrayHandle e = ones(8);
  TRY(KVStorePush(kv, 1, &k3, &e, 0));
  TRY(KVStorePull(kv, 1, &k3, &a, 0));
  print_pdl(a);
  KVArrayHandle two[2] = {ones_ctx(1, KV_CPU, 0), ones_ctx(1, KV_CPU, 1)};
  int k33[2] = {3, 3};
  TRY(KVStorePush(kv, 2, k33, two, 0));
  TRY(KVStorePull(kv, 1, &k3, &a, 0));
  print_pdl(a);
  ScaledUpdater upd = {3.0, "update on key: %d\n"};
  TRY(KVStoreSetUpdater(kv, scaled_update, &upd, NULL));
  TRY(KVStorePush(kv, 2, k33, two, 0));
  TRY(KVStorePull(kv, 1, &k3, &a, 0));
  print_pdl(a);
  KVArrayHandle zz[2] = {ones_ctx(0, KV_CPU, 0), ones_ctx(0, KV_CPU, 1)};
  TRY(KVStorePull(kv, 2, k33, zz, 0));
  print_pdl(zz[1]);
  int keys[3] = {5, 7, 9};
  KVArrayHandle l[3] = {ones(1), ones(1), ones(1)};
  TRY(KVStoreInit(kv, 3, keys, l));
  TRY(KVStorePush(kv, 3, keys, l, 0));
  TRY(KVStorePull(kv, 3, keys, l, 0));
  print_pdl(l[1]);
  KVArrayFree(v), KVArrayFree(a), KVArrayFree(e);
  for (int i = 0; i < 2; ++i) KVArrayFree(two[i]), KVArrayFree(zz[i]);
  for (int i = 0; i < 3; ++i) KVArrayFree(l[i]);
  return KVStoreFree(kv);
}
