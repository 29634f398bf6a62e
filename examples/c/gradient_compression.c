/* gradient_compression.c - 2-bit gradient compression with error feedback: a device store
 * quantises every pushed gradient to +threshold, -threshold or 0 per element (16 elements
 * per 4 bytes on a dist_* store's wire) and keeps what it did not send in a residual that
 * is added to the next push. The `test` optimizer adds each received gradient to the
 * weight, so the weight shows what arrived: a gradient of 0.3 per step with threshold 0.5
 * arrives as 0, 0.5, 0, 0.5, 0.5, ... and the total lags the true sum by the residual,
 * never by more than the threshold. The rules: kvstore.h KVStoreSetGradientCompression. */
#include "example_util.h"

int main(void) {
  const int key = 0;
  KVStoreHandle kv = NULL;
  TRY(KVStoreCreate("device", &kv));
  TRY(KVStoreSetOptimizer(kv, "test"));
  const char* names[2] = {"type", "threshold"};
  const char* values[2] = {"2bit", "0.5"};
  TRY(KVStoreSetGradientCompression(kv, 2, names, values));

  KVArrayHandle w = ones(0.0);
  TRY(KVStoreInit(kv, 1, &key, &w));
  KVArrayHandle g = ones(0.3);
  float got[6];
  double sent = 0.0;
  for (int step = 1; step <= 6; ++step) {
    TRY(KVStorePush(kv, 1, &key, &g, 0));
    TRY(KVStorePull(kv, 1, &key, &w, 0));
    read6(w, got);
    sent += 0.3;
    printf("step %d: weight %.1f (true sum %.1f, residual %.1f)\n", step, got[0], sent,
           sent - got[0]);
  }

  /* Off again: the next push arrives exactly, and the residual is dropped. */
  const char* none[1] = {"none"};
  TRY(KVStoreSetGradientCompression(kv, 1, names, none));
  TRY(KVStorePush(kv, 1, &key, &g, 0));
  TRY(KVStorePull(kv, 1, &key, &w, 0));
  read6(w, got);
  printf("uncompressed step: weight %.1f\n", got[0]);

  KVArrayFree(g);
  KVArrayFree(w);
  TRY(KVStoreFree(kv));
  return 0;
}
