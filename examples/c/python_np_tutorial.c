/* The Python numpy-flavour KVStore tutorial (shared/seeds/python-np-kvstore.md) in C. */
#include "example_util.h"

int main(void) {
  KVStoreHandle kv;
  TRY(KVStoreCreate("device", &kv));
  int k3 = 3;
  KVArrayHandle v = ones(-2), A = ones(0);
  TRY(KVStoreInit(kv, 1, &k3, &v));
  TRY(KVStorePull(kv, 1, &k3, &A, 0));
  print_numpy_repr(A);

  KVArrayHandle m7 = ones(-7);
  TRY(KVStorePush(kv, 1, &k3, &m7, 0));
  TRY(KVStorePull(kv, 1, &k3, &A, 0));
  print_numpy_repr(A);

  /* B = [np.ones(shape, ctx=ctx) for ctx in [cpu(0), cpu(1), cpu(2)]] */
  KVArrayHandle B[3] = {ones_ctx(1, KV_CPU, 0), ones_ctx(1, KV_CPU, 1), ones_ctx(1, KV_CPU, 2)};
  int k3x3[3] = {3, 3, 3};
  TRY(KVStorePush(kv, 3, k3x3, B, 0));
  TRY(KVStorePull(kv, 1, &k3, &A, 0));
  print_numpy_repr(A);

  int keys[4] = {7, 11, 13, 17};
  KVArrayHandle val = ones(-3), C = ones(0);
  KVArrayHandle vals[4] = {val, val, val, val}, Cs[4] = {C, C, C, C};
  TRY(KVStoreInit(kv, 4, keys, vals));
  TRY(KVStorePull(kv, 4, keys, Cs, 0));
  print_numpy_str(C);

  /* D = [[np.ones(shape, ctx=ctx) * (-0.1) for ctx in contexts]] * len(keys) */
  KVArrayHandle D[3] = {ones_ctx(-0.1, KV_CPU, 0), ones_ctx(-0.1, KV_CPU, 1), ones_ctx(-0.1, KV_CPU, 2)};
  int dk[12];
  KVArrayHandle dv[12];
  for (int i = 0; i < 12; ++i) dk[i] = keys[i / 3], dv[i] = D[i % 3];
  printf("D[0] :  [");
  for (int i = 0; i < 3; ++i) {
    print_numpy_repr(D[i]);
  }
  printf("]\n");
  TRY(KVStorePush(kv, 12, dk, dv, 0));
  TRY(KVStorePull(kv, 4, keys, Cs, 0));
  print_numpy_repr(C);

  ScaledUpdater upd = {0.01, "update on key: %d\n"};
  TRY(KVStoreSetUpdater(kv, scaled_update, &upd, NULL));
  TRY(KVStorePull(kv, 1, &k3, &A, 0));
  print_numpy_repr(A); /* unchanged: nothing was pushed */
  KVArrayHandle five = ones(5);
  TRY(KVStorePush(kv, 1, &k3, &five, 0));
  TRY(KVStorePull(kv, 1, &k3, &A, 0));
  print_numpy_str(A); /* 3 + 5 * 0.01 */

  KVArrayFree(v), KVArrayFree(A), KVArrayFree(m7), KVArrayFree(val), KVArrayFree(C), KVArrayFree(five);
  for (int i = 0; i < 3; ++i) KVArrayFree(B[i]), KVArrayFree(D[i]);
  return KVStoreFree(kv);
}
