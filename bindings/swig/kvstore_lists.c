/* kvstore_lists.c - count-checking shims of the list calls, shared by every SWIG module.
 * See kvstore_lists.h for the protocol. */
#include "kvstore_lists.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* This thread's binding error: the message and whether one is recorded. */
static _Thread_local char kvswig_error[512];
static _Thread_local int kvswig_has_error;

int kvswig_fail(int code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(kvswig_error, sizeof kvswig_error, fmt, ap);
  va_end(ap);
  kvswig_has_error = 1;
  return code;
}

const char* kvswig_take_error(void) {
  if (!kvswig_has_error) return NULL;
  kvswig_has_error = 0;
  return kvswig_error;
}

void kvswig_clear_error(void) { kvswig_has_error = 0; }

/* 0 when the handle list `list` (n elements) pairs with the key list `keys` (nkeys). */
static int kvswig_count(const char* call, const char* list, int n, const char* keys, int nkeys) {
  if (n == nkeys) return 0;
  return kvswig_fail(KV_ERR_INVALID_ARGUMENT, "%s: %s has %d elements but %s has %d", call, list,
                     n, keys, nkeys);
}

int kvswig_init(KVStoreHandle store, int num, const int* keys, int nvals,
                const KVArrayHandle* vals) {
  int rc = kvswig_count("KVStoreInit", "vals", nvals, "keys", num);
  return rc ? rc : KVStoreInit(store, num, keys, vals);
}

int kvswig_init_str(KVStoreHandle store, int num, const char* const* keys, int nvals,
                    const KVArrayHandle* vals) {
  int rc = kvswig_count("KVStoreInitStr", "vals", nvals, "keys", num);
  return rc ? rc : KVStoreInitStr(store, num, keys, vals);
}

int kvswig_push(KVStoreHandle store, int num, const int* keys, int nvals,
                const KVArrayHandle* vals, int priority) {
  int rc = kvswig_count("KVStorePush", "vals", nvals, "keys", num);
  return rc ? rc : KVStorePush(store, num, keys, vals, priority);
}

int kvswig_push_str(KVStoreHandle store, int num, const char* const* keys, int nvals,
                    const KVArrayHandle* vals, int priority) {
  int rc = kvswig_count("KVStorePushStr", "vals", nvals, "keys", num);
  return rc ? rc : KVStorePushStr(store, num, keys, vals, priority);
}

int kvswig_pull(KVStoreHandle store, int num, const int* keys, int nouts,
                const KVArrayHandle* outs, int priority) {
  int rc = kvswig_count("KVStorePull", "outs", nouts, "keys", num);
  return rc ? rc : KVStorePull(store, num, keys, outs, priority);
}

int kvswig_pull_str(KVStoreHandle store, int num, const char* const* keys, int nouts,
                    const KVArrayHandle* outs, int priority) {
  int rc = kvswig_count("KVStorePullStr", "outs", nouts, "keys", num);
  return rc ? rc : KVStorePullStr(store, num, keys, outs, priority);
}

/* Push-and-pull and broadcast: values against vkeys, then outputs against okeys. */
static int kvswig_count_two(const char* call, int vnum, int nvals, int onum, int nouts) {
  int rc = kvswig_count(call, "vals", nvals, "vkeys", vnum);
  return rc ? rc : kvswig_count(call, "outs", nouts, "okeys", onum);
}

int kvswig_pushpull(KVStoreHandle store, int vnum, const int* vkeys, int nvals,
                    const KVArrayHandle* vals, int onum, const int* okeys, int nouts,
                    const KVArrayHandle* outs, int priority) {
  int rc = kvswig_count_two("KVStorePushPull", vnum, nvals, onum, nouts);
  return rc ? rc : KVStorePushPull(store, vnum, vkeys, vals, onum, okeys, outs, priority);
}

int kvswig_pushpull_str(KVStoreHandle store, int vnum, const char* const* vkeys, int nvals,
                        const KVArrayHandle* vals, int onum, const char* const* okeys,
                        int nouts, const KVArrayHandle* outs, int priority) {
  int rc = kvswig_count_two("KVStorePushPullStr", vnum, nvals, onum, nouts);
  return rc ? rc : KVStorePushPullStr(store, vnum, vkeys, vals, onum, okeys, outs, priority);
}

int kvswig_broadcast(KVStoreHandle store, int vnum, const int* vkeys, int nvals,
                     const KVArrayHandle* vals, int onum, const int* okeys, int nouts,
                     const KVArrayHandle* outs, int priority) {
  int rc = kvswig_count_two("KVStoreBroadcast", vnum, nvals, onum, nouts);
  return rc ? rc : KVStoreBroadcast(store, vnum, vkeys, vals, onum, okeys, outs, priority);
}

int kvswig_set_gradient_compression(KVStoreHandle store, int vnum, const char* const* vkeys,
                                    int onum, const char* const* okeys) {
  int rc = kvswig_count("KVStoreSetGradientCompression", "values", onum, "names", vnum);
  return rc ? rc : KVStoreSetGradientCompression(store, vnum, vkeys, okeys);
}

int kvswig_broadcast_str(KVStoreHandle store, int vnum, const char* const* vkeys, int nvals,
                         const KVArrayHandle* vals, int onum, const char* const* okeys,
                         int nouts, const KVArrayHandle* outs, int priority) {
  int rc = kvswig_count_two("KVStoreBroadcastStr", vnum, nvals, onum, nouts);
  return rc ? rc : KVStoreBroadcastStr(store, vnum, vkeys, vals, onum, okeys, outs, priority);
}

/* Row-sparse pull: outputs, then row_ids, against keys. */
static int kvswig_count_rows(const char* call, int num, int nouts, int nrow_ids) {
  int rc = kvswig_count(call, "outs", nouts, "keys", num);
  return rc ? rc : kvswig_count(call, "row_ids", nrow_ids, "keys", num);
}

int kvswig_row_sparse_pull(KVStoreHandle store, int num, const int* keys, int nouts,
                           const KVArrayHandle* outs, int nrow_ids, const KVArrayHandle* row_ids,
                           int priority) {
  int rc = kvswig_count_rows("KVStoreRowSparsePull", num, nouts, nrow_ids);
  return rc ? rc : KVStoreRowSparsePull(store, num, keys, outs, row_ids, priority);
}

int kvswig_row_sparse_pull_str(KVStoreHandle store, int num, const char* const* keys,
                               int nouts, const KVArrayHandle* outs, int nrow_ids,
                               const KVArrayHandle* row_ids, int priority) {
  int rc = kvswig_count_rows("KVStoreRowSparsePullStr", num, nouts, nrow_ids);
  return rc ? rc : KVStoreRowSparsePullStr(store, num, keys, outs, row_ids, priority);
}

int kvswig_profile_get_stats(const char** out_stats) {
  static _Thread_local char* buf;
  static _Thread_local size_t cap;
  for (;;) {
    size_t need = 0;
    int rc = KVProfileGetStats(buf, cap, &need);
    if (rc == 0) {
      *out_stats = buf;
      return 0;
    }
    if (rc != KV_ERR_INVALID_ARGUMENT || need <= cap) return rc;
    /* Too small (keys may be added between two calls): grow and ask again. */
    char* grown = realloc(buf, need);
    if (grown == NULL) return kvswig_fail(KV_ERR_OUT_OF_MEMORY, "KVProfileGetStats: out of memory");
    buf = grown;
    cap = need;
  }
}
