/* basic_tutorial.h - the sequence the Python and Scala tutorials share (init, push, push of
 * one value per device, updater, multi-device pull, list of keys), printed with the caller's
 * formatter. */
#ifndef KVSTORE_EXAMPLE_BASIC_TUTORIAL_H_
#define KVSTORE_EXAMPLE_BASIC_TUTORIAL_H_

#include "example_util.h"

/* Runs the shared steps on `kv`; leaves the four per-device arrays in `b` (gpu(i), or cpu(i)
 * without GPUs) for the caller's further steps. `updater` must stay valid while kv lives. */
static inline void run_basic_tutorial(KVStoreHandle kv, void (*show)(KVArrayHandle), ScaledUpdater* updater,
                                      const char* list_update_fmt, KVArrayHandle b[4]) {
  int k3 = 3, gpu = gpu_or_cpu(4);
  KVArrayHandle v = ones(2), a = ones(0);
  TRY(KVStoreInit(kv, 1, &k3, &v));
  TRY(KVStorePull(kv, 1, &k3, &a, 0));
  show(a);

  KVArrayHandle e = ones(8);
  TRY(KVStorePush(kv, 1, &k3, &e, 0));
  TRY(KVStorePull(kv, 1, &k3, &a, 0));
  show(a);

  /* b = [ones(shape, gpu) for gpu in gpus]; kv.push(3, b) */
  int k3x4[4] = {3, 3, 3, 3};
  for (int i = 0; i < 4; ++i) b[i] = ones_ctx(1, gpu, i);
  TRY(KVStorePush(kv, 4, k3x4, b, 0));
  TRY(KVStorePull(kv, 1, &k3, &a, 0));
  show(a);

  TRY(KVStoreSetUpdater(kv, scaled_update, updater, NULL));
  TRY(KVStorePull(kv, 1, &k3, &a, 0));
  show(a);
  KVArrayHandle one = ones(1);
  TRY(KVStorePush(kv, 1, &k3, &one, 0));
  TRY(KVStorePull(kv, 1, &k3, &a, 0));
  show(a);

  /* pull into several devices */
  for (int i = 0; i < 4; ++i) TRY(KVArrayFill(b[i], 1));
  TRY(KVStorePull(kv, 4, k3x4, b, 0));
  show(b[1]);

  /* list of keys on one device */
  int keys[3] = {5, 7, 9};
  KVArrayHandle l[3] = {ones(1), ones(1), ones(1)}, z[3] = {ones(0), ones(0), ones(0)};
  TRY(KVStoreInit(kv, 3, keys, l));
  updater->fmt = list_update_fmt;
  TRY(KVStorePush(kv, 3, keys, l, 0));
  TRY(KVStorePull(kv, 3, keys, z, 0));
  show(z[1]);

  KVArrayFree(v), KVArrayFree(a), KVArrayFree(e), KVArrayFree(one);
  for (int i = 0; i < 3; ++i) KVArrayFree(l[i]), KVArrayFree(z[i]);
}

#endif
