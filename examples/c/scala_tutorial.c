/* The Scala KVStore tutorial (shared/seeds/scala-kvstore.md) in C. */
#include "basic_tutorial.h"

int main(void) {
  KVStoreHandle kv;
  TRY(KVStoreCreate("local", &kv));
  ScaledUpdater upd = {2.0, "update on key %d\n"};
  KVArrayHandle b[4];
  run_basic_tutorial(kv, print_scala, &upd, "update on key: %d\n", b);
  for (int i = 0; i < 4; ++i) KVArrayFree(b[i]);
  return KVStoreFree(kv);
}
