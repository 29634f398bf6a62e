/* optimizer_states.c - checkpointing training with KVStoreSaveOptimizerStates and
 * KVStoreLoadOptimizerStates: a run of 3 adam steps saves its weights and its optimizer's
 * state, a "restarted" run (a new store: the same optimizer, the weights as saved, the state
 * loaded) does 2 more steps, and its weights equal, bit for bit, those of 5 steps without a
 * restart. Without the state the restarted adam would begin again at step 1 with zero
 * moments, and the weights would differ (printed too). Works alike on dist_* stores, where
 * the state lives on the servers. The format: docs/OPTIMIZER-STATES.md. */
#include <unistd.h>

#include "example_util.h"

static const char* kSpec = "adam(learning_rate=0.1)";

/* A local store with the optimizer and key 0 holding `w` (NULL: ones). */
static KVStoreHandle new_store(KVArrayHandle w) {
  KVStoreHandle kv = NULL;
  const int key = 0;
  TRY(KVStoreCreate("local", &kv));
  TRY(KVStoreSetOptimizer(kv, kSpec));
  KVArrayHandle init = w ? w : ones(1.0);
  TRY(KVStoreInit(kv, 1, &key, &init));
  if (!w) KVArrayFree(init);
  return kv;
}

/* Steps [from, to): the gradient of step s is (s + 1) * 0.25 everywhere. */
static void train(KVStoreHandle kv, int from, int to) {
  const int key = 0;
  for (int s = from; s < to; ++s) {
    KVArrayHandle g = ones(0.25 * (s + 1));
    TRY(KVStorePush(kv, 1, &key, &g, 0));
    KVArrayFree(g);
  }
}

static KVArrayHandle weights(KVStoreHandle kv) {
  const int key = 0;
  KVArrayHandle w = ones(0.0);
  TRY(KVStorePull(kv, 1, &key, &w, 0));
  return w;
}

static void show(const char* what, KVArrayHandle a) {
  float v[6];
  read6(a, v);
  printf("%-28s %.9g\n", what, (double)v[0]);
}

int main(void) {
  char path[64];
  snprintf(path, sizeof path, "/tmp/kv_example_%d.kvos", (int)getpid());

  KVStoreHandle first = new_store(NULL);
  train(first, 0, 3);
  TRY(KVStoreSaveOptimizerStates(first, path));
  KVArrayHandle saved = weights(first);
  show("after 3 steps:", saved);
  TRY(KVStoreFree(first));

  KVStoreHandle restarted = new_store(saved);
  TRY(KVStoreLoadOptimizerStates(restarted, path));
  train(restarted, 3, 5);
  KVArrayHandle resumed = weights(restarted);
  show("restarted, 2 more steps:", resumed);

  KVStoreHandle fresh = new_store(saved);  /* the same weights, no state loaded */
  train(fresh, 3, 5);
  KVArrayHandle stateless = weights(fresh);
  show("restarted without the state:", stateless);

  KVStoreHandle whole = new_store(NULL);
  train(whole, 0, 5);
  KVArrayHandle straight = weights(whole);
  show("5 steps, no restart:", straight);

  float a[6], b[6];
  read6(resumed, a);
  read6(straight, b);
  printf("bit-identical: %s\n", memcmp(a, b, sizeof a) == 0 ? "yes" : "no");

  remove(path);
  KVArrayFree(saved);
  KVArrayFree(resumed);
  KVArrayFree(stateless);
  KVArrayFree(straight);
  TRY(KVStoreFree(restarted));
  TRY(KVStoreFree(fresh));
  TRY(KVStoreFree(whole));
  return 0;
}
