/* The Python KVStore tutorial (shared/seeds/python-kvstore.md) in C. */
#include "basic_tutorial.h"

int main(void) {
  KVStoreHandle kv;
  TRY(KVStoreCreate("local", &kv));
  ScaledUpdater upd = {2.0, "update on key: %d\n"};
  KVArrayHandle b[4];
  run_basic_tutorial(kv, print_numpy_legacy, &upd, "update on key: %d\n", b);

  /* list of keys, each with a value per device: b = [[ones on gpus]] * len(keys) */
  int keys[3] = {5, 7, 9}, flat_keys[12];
  KVArrayHandle flat[12];
  for (int i = 0; i < 4; ++i) TRY(KVArrayFill(b[i], 1));
  for (int i = 0; i < 12; ++i) flat_keys[i] = keys[i / 4], flat[i] = b[i % 4];
  TRY(KVStorePush(kv, 12, flat_keys, flat, 0));
  TRY(KVStorePull(kv, 12, flat_keys, flat, 0));
  print_numpy_legacy(b[1]);

  for (int i = 0; i < 4; ++i) KVArrayFree(b[i]);
  return KVStoreFree(kv);
}
