/* test_store.c - in-process store semantics through the public C ABI, and the promise that
 * every failing call leaves every stored value unchanged. */
#include "../common/arrays.h"

/* ---- updaters used below ---- */

typedef struct {
  int calls;
  int last_key;
  int freed;
  int fail_on_key; /* returns 1 for this key */
  double scale;
} UpdaterState;

static int scaled_add(int key, KVArrayHandle recv, KVArrayHandle stored, void* user_data) {
  UpdaterState* st = (UpdaterState*)user_data;
  st->calls++;
  st->last_key = key;
  if (key == st->fail_on_key) {
    KVArrayFill(stored, -999); /* scribble first: the store must discard this */
    return 1;
  }
  KVArrayHandle tmp = NULL;
  int64_t dims[KV_MAX_NDIM];
  int ndim = 0, dtype = 0;
  KVArrayGetShape(recv, dims, KV_MAX_NDIM, &ndim);
  KVArrayGetDType(recv, &dtype);
  if (KVArrayCreate(dims, ndim, dtype, KV_CPU, 0, &tmp) != 0) return 2;
  int rc = KVArrayBinaryScalar(KV_OP_MUL, recv, st->scale, tmp) || KVArrayBinary(KV_OP_ADD, stored, tmp, stored);
  KVArrayFree(tmp);
  return rc;
}

static const char* g_last_str_key = NULL;
static char g_str_key_buf[64];
static int str_assign_double(const char* key, KVArrayHandle recv, KVArrayHandle stored, void* user_data) {
  (void)user_data;
  snprintf(g_str_key_buf, sizeof g_str_key_buf, "%s", key);
  g_last_str_key = g_str_key_buf;
  return KVArrayBinaryScalar(KV_OP_MUL, recv, 2, stored);
}

static void count_free(void* user_data) { ((UpdaterState*)user_data)->freed++; }

static KVStoreHandle g_reentrant_store;
static int g_reentrant_rc;
static int reentrant(int key, KVArrayHandle recv, KVArrayHandle stored, void* user_data) {
  (void)recv;
  (void)user_data;
  g_reentrant_rc = KVStorePull(g_reentrant_store, 1, &key, &stored, 0);
  return 0;
}

/* ---- tests ---- */

static void test_types(void) {
  KVStoreHandle kv = NULL;
  const char* type = NULL;
  const char* names[] = {"local", "LOCAL_update_cpu", "local_allreduce_cpu", "Device", "local_allreduce_device"};
  const char* lowered[] = {"local", "local_update_cpu", "local_allreduce_cpu", "device", "local_allreduce_device"};
  for (int i = 0; i < 5; ++i) {
    CHECK_OK(KVStoreCreate(names[i], &kv));
    CHECK_OK(KVStoreGetType(kv, &type));
    CHECK(strcmp(type, lowered[i]) == 0);
    int rank = -1, size = -1, dead = -1;
    CHECK_OK(KVStoreGetRank(kv, &rank));
    CHECK_OK(KVStoreGetGroupSize(kv, &size));
    CHECK(rank == 0 && size == 1);
    CHECK_OK(KVStoreBarrier(kv));
    CHECK_OK(KVStoreWaitAll(kv));
    CHECK_OK(KVStoreGetNumDeadNode(kv, KV_NODE_WORKERS, 60, &dead));
    CHECK(dead == 0);
    CHECK_ERR(KVStoreSetBarrierBeforeExit(kv, 1), KV_ERR_NOT_SUPPORTED, "not a distributed worker");
    CHECK_ERR(KVStoreSendCommandToServers(kv, 0, "x"), KV_ERR_NOT_SUPPORTED, "no servers");
    CHECK_ERR(KVStoreRunServer(kv, NULL, NULL), KV_ERR_NOT_SUPPORTED, "cannot run a server");
    CHECK_OK(KVStoreFree(kv));
  }
  kv = (KVStoreHandle)0x1;
  CHECK_ERR(KVStoreCreate("bogus", &kv), KV_ERR_INVALID_ARGUMENT, "valid types: local, local_update_cpu");
  CHECK(kv == (KVStoreHandle)0x1);
  CHECK_ERR(KVStoreCreate(NULL, &kv), KV_ERR_NULL_POINTER, "type");
  if (!KVHasFeature(KV_FEATURE_NCCL)) {
    CHECK_ERR(KVStoreCreate("nccl", &kv), KV_ERR_NOT_SUPPORTED, "NCCL");
  }
  if (!KVHasFeature(KV_FEATURE_DIST)) {
    CHECK_ERR(KVStoreCreate("dist_sync", &kv), KV_ERR_NOT_SUPPORTED, "distributed");
  }
  CHECK_OK(KVStoreFree(NULL));
}

static void test_push_pull_semantics(void) {
  KVStoreHandle kv = NULL;
  CHECK_OK(KVStoreCreate("local", &kv));
  int keys[3] = {5, 7, 9};
  KVArrayHandle v[3] = {make_f32(1, 0), make_f32(2, 0), make_f32(3, 0)};
  CHECK_OK(KVStoreInit(kv, 3, keys, v));
  KVArrayFill(v[0], 100); /* init copied the value */
  CHECK(stored_is(kv, 5, 1) && stored_is(kv, 7, 2) && stored_is(kv, 9, 3));

  /* repeated keys in one push are summed, values on different cpu contexts */
  int rep[4] = {7, 7, 7, 9};
  KVArrayHandle pv[4] = {make_f32(1, 0), make_f32(2, 1), make_f32(4, 2), make_f32(10, 3)};
  CHECK_OK(KVStorePush(kv, 4, rep, pv, 0));
  CHECK(stored_is(kv, 7, 7) && stored_is(kv, 9, 10) && stored_is(kv, 5, 1));
  CHECK_OK(KVStorePush(kv, 1, rep, pv, -5)); /* any priority is accepted */
  CHECK(stored_is(kv, 7, 1));

  /* pull into several outputs on several contexts */
  int pk[3] = {9, 9, 5};
  KVArrayHandle outs[3] = {make_f32(0, 0), make_f32(0, 4), make_f32(0, 1)};
  CHECK_OK(KVStorePull(kv, 3, pk, outs, 0));
  CHECK(all_f32(outs[0], 10) && all_f32(outs[1], 10) && all_f32(outs[2], 1));

  /* pushpull: outputs may be the pushed arrays themselves */
  int ppk[2] = {5, 5};
  KVArrayHandle ppv[2] = {make_f32(3, 0), make_f32(4, 1)};
  CHECK_OK(KVStorePushPull(kv, 2, ppk, ppv, 2, ppk, ppv, 0));
  CHECK(all_f32(ppv[0], 7) && all_f32(ppv[1], 7) && stored_is(kv, 5, 7));
  int other = 7;
  CHECK_ERR(KVStorePushPull(kv, 1, ppk, ppv, 1, &other, outs, 0), KV_ERR_INVALID_ARGUMENT, "same set");
  CHECK(stored_is(kv, 5, 7));

  /* broadcast = init + pull; a second broadcast of the key fails */
  int bk = 11;
  KVArrayHandle bval = make_f32(6, 0), bouts[2] = {make_f32(0, 0), make_f32(0, 2)};
  int bok[2] = {11, 11};
  CHECK_OK(KVStoreBroadcast(kv, 1, &bk, &bval, 2, bok, bouts, 0));
  CHECK(all_f32(bouts[0], 6) && all_f32(bouts[1], 6) && stored_is(kv, 11, 6));
  KVArrayFill(bval, 1);
  CHECK_ERR(KVStoreBroadcast(kv, 1, &bk, &bval, 1, bok, bouts, 0), KV_ERR_DUPLICATE_KEY, "duplicate init of key 11");
  CHECK(stored_is(kv, 11, 6));

  for (int i = 0; i < 3; ++i) KVArrayFree(v[i]), KVArrayFree(outs[i]);
  for (int i = 0; i < 4; ++i) KVArrayFree(pv[i]);
  KVArrayFree(ppv[0]), KVArrayFree(ppv[1]), KVArrayFree(bval), KVArrayFree(bouts[0]), KVArrayFree(bouts[1]);
  KVStoreFree(kv);
}

/* Records the order in which keys reach the updater, then assigns the pushed sum. */
static int g_order[64];
static int g_order_len;
static int record_order(int key, KVArrayHandle recv, KVArrayHandle stored, void* user_data) {
  (void)user_data;
  if (g_order_len < 64) g_order[g_order_len++] = key;
  return KVArrayCopy(stored, recv);
}

/* A push of many keys (more than a linear scan groups), each listed twice, interleaved. */
static void test_many_keys(void) {
  enum { kKeys = 40 };
  KVStoreHandle kv = NULL;
  KVStoreCreate("local", &kv);
  int keys[kKeys], twice[2 * kKeys];
  KVArrayHandle zero = make_f32(0, 0), vals[2 * kKeys];
  KVArrayHandle init_vals[kKeys];
  for (int i = 0; i < kKeys; ++i) keys[i] = 1000 - 7 * i, init_vals[i] = zero;
  CHECK_OK(KVStoreInit(kv, kKeys, keys, init_vals));
  for (int i = 0; i < 2 * kKeys; ++i) {
    twice[i] = keys[i % kKeys];
    vals[i] = make_f32(i < kKeys ? i : 100, 0);
  }
  g_order_len = 0;
  CHECK_OK(KVStoreSetUpdater(kv, record_order, NULL, NULL));
  CHECK_OK(KVStorePush(kv, 2 * kKeys, twice, vals, 0));
  CHECK(g_order_len == kKeys);
  int in_order = 1, sums = 1;
  for (int i = 0; i < kKeys; ++i) {
    if (g_order[i] != keys[i]) in_order = 0;
    if (!stored_is(kv, keys[i], (float)(i + 100))) sums = 0;
  }
  CHECK(in_order); /* the updater sees keys in order of first appearance */
  CHECK(sums);     /* both values of every key were summed */
  for (int i = 0; i < 2 * kKeys; ++i) KVArrayFree(vals[i]);
  KVArrayFree(zero);
  KVStoreFree(kv);
}

static void test_dtypes(void) {
  const int dtypes[6] = {KV_FLOAT32, KV_FLOAT64, KV_FLOAT16, KV_UINT8, KV_INT32, KV_INT64};
  for (int d = 0; d < 6; ++d) {
    KVStoreHandle kv = NULL;
    KVStoreCreate("device", &kv);
    KVArrayHandle a = NULL, b = NULL, c = NULL, out = NULL;
    int64_t n = 37;
    KVArrayCreate(&n, 1, dtypes[d], KV_CPU, 0, &a);
    KVArrayCreate(&n, 1, dtypes[d], KV_CPU, 1, &b);
    KVArrayCreate(&n, 1, dtypes[d], KV_CPU, 2, &c);
    KVArrayCreate(&n, 1, dtypes[d], KV_CPU, 0, &out);
    KVArrayFill(a, 3);
    KVArrayFill(b, 4);
    KVArrayFill(c, 5);
    int key = 1, keys3[3] = {1, 1, 1};
    CHECK_OK(KVStoreInit(kv, 1, &key, &a));
    KVArrayHandle vals[3] = {a, b, c};
    CHECK_OK(KVStorePush(kv, 3, keys3, vals, 0));
    CHECK_OK(KVStorePull(kv, 1, &key, &out, 0));
    KVArrayHandle expect = NULL;
    KVArrayCreate(&n, 1, dtypes[d], KV_CPU, 0, &expect);
    KVArrayFill(expect, 12);
    unsigned char got_bytes[37 * 8], want_bytes[37 * 8];
    size_t nb = 0;
    KVArrayGetNBytes(out, &nb);
    KVArrayCopyToHost(out, got_bytes, nb);
    KVArrayCopyToHost(expect, want_bytes, nb);
    CHECK(memcmp(got_bytes, want_bytes, nb) == 0);
    KVArrayFree(a), KVArrayFree(b), KVArrayFree(c), KVArrayFree(out), KVArrayFree(expect);
    KVStoreFree(kv);
  }
}

static void test_updaters(void) {
  KVStoreHandle kv = NULL;
  KVStoreCreate("local", &kv);
  int key = 3;
  KVArrayHandle v = make_f32(4, 0), one = make_f32(1, 0);
  KVStoreInit(kv, 1, &key, &v);
  UpdaterState st = {0, -1, 0, -1, 2.0};
  CHECK_OK(KVStoreSetUpdater(kv, scaled_add, &st, count_free));
  CHECK(st.calls == 0); /* never at registration */
  CHECK_OK(KVStorePush(kv, 1, &key, &one, 0));
  CHECK(st.calls == 1 && st.last_key == 3 && stored_is(kv, 3, 6));
  int key2 = 4;
  CHECK_OK(KVStoreInit(kv, 1, &key2, &v));
  CHECK(st.calls == 1); /* never at init */
  /* replacing the registration releases the previous one exactly once */
  UpdaterState st2 = {0, -1, 0, -1, 10.0};
  CHECK_OK(KVStoreSetUpdater(kv, scaled_add, &st2, count_free));
  CHECK(st.freed == 1);
  CHECK_OK(KVStorePush(kv, 1, &key, &one, 0));
  CHECK(st2.calls == 1 && stored_is(kv, 3, 16) && st.calls == 1);
  /* clearing restores assign */
  CHECK_OK(KVStoreSetUpdater(kv, NULL, NULL, NULL));
  CHECK(st2.freed == 1);
  CHECK_OK(KVStorePush(kv, 1, &key, &one, 0));
  CHECK(stored_is(kv, 3, 1));
  /* the store releases its registration when freed */
  UpdaterState st3 = {0, -1, 0, -1, 1.0};
  KVStoreSetUpdater(kv, scaled_add, &st3, count_free);
  KVStoreFree(kv);
  CHECK(st3.freed == 1 && st.freed == 1 && st2.freed == 1);
  CHECK_ERR(KVStoreSetUpdater(NULL, scaled_add, &st3, count_free), KV_ERR_NULL_POINTER, "store");
  CHECK(st3.freed == 1); /* a failed registration does not take ownership */

  /* string keys: the string updater is preferred; without it the int updater gets the id */
  KVStoreCreate("local", &kv);
  const char* skeys[2] = {"weight", "bias"};
  KVArrayHandle sv[2] = {make_f32(1, 0), make_f32(2, 0)};
  CHECK_OK(KVStoreInitStr(kv, 2, skeys, sv));
  UpdaterState sti = {0, -1, 0, -1, 1.0};
  CHECK_OK(KVStoreSetUpdater(kv, scaled_add, &sti, NULL));
  CHECK_OK(KVStorePushStr(kv, 1, &skeys[1], &one, 0));
  CHECK(sti.calls == 1 && sti.last_key == 1 && stored_str_is(kv, "bias", 3));
  CHECK_OK(KVStoreSetStrUpdater(kv, str_assign_double, NULL, NULL));
  CHECK_OK(KVStorePushStr(kv, 1, &skeys[0], &one, 0));
  CHECK(g_last_str_key && strcmp(g_last_str_key, "weight") == 0 && stored_str_is(kv, "weight", 2));
  CHECK(sti.calls == 1);
  /* the empty string is a string key like any other */
  const char* empty = "";
  CHECK_OK(KVStoreInitStr(kv, 1, &empty, &one));
  CHECK_OK(KVStorePushStr(kv, 1, &empty, &one, 0));
  CHECK(g_last_str_key && strcmp(g_last_str_key, "") == 0 && stored_str_is(kv, "", 2));
  KVStoreFree(kv);

  /* an updater must not call back into its own store */
  KVStoreCreate("local", &kv);
  KVStoreInit(kv, 1, &key, &v);
  g_reentrant_store = kv;
  KVStoreSetUpdater(kv, reentrant, NULL, NULL);
  CHECK_OK(KVStorePush(kv, 1, &key, &one, 0));
  CHECK(g_reentrant_rc == KV_ERR_INVALID_ARGUMENT);
  CHECK(strstr(KVGetLastError(), "inside its own updater") != NULL);
  KVStoreFree(kv);

  KVArrayFree(v), KVArrayFree(one), KVArrayFree(sv[0]), KVArrayFree(sv[1]);
}

/* Every kind of failure leaves every stored value as it was. */
static void test_errors_leave_store_unchanged(void) {
  KVStoreHandle kv = NULL;
  KVStoreCreate("local", &kv);
  int keys[2] = {1, 2};
  KVArrayHandle v[2] = {make_f32(10, 0), make_f32(20, 0)};
  CHECK_OK(KVStoreInit(kv, 2, keys, v));
  KVArrayHandle one = make_f32(1, 0), out = make_f32(-5, 0);
#define UNCHANGED() CHECK(stored_is(kv, 1, 10) && stored_is(kv, 2, 20))

  /* null handle, null arrays, wrong counts */
  CHECK_ERR(KVStorePush(NULL, 1, keys, &one, 0), KV_ERR_NULL_POINTER, "store");
  KVArrayHandle with_null[2] = {one, NULL};
  CHECK_ERR(KVStorePush(kv, 2, keys, with_null, 0), KV_ERR_NULL_POINTER, "push array 1 (key 2)");
  UNCHANGED();
  CHECK_ERR(KVStorePush(kv, -1, keys, v, 0), KV_ERR_INVALID_ARGUMENT, "negative");
  CHECK_ERR(KVStorePush(kv, 2, NULL, v, 0), KV_ERR_NULL_POINTER, "keys");
  CHECK_ERR(KVStorePull(kv, 2, keys, NULL, 0), KV_ERR_NULL_POINTER, "arrays");
  UNCHANGED();
  CHECK_OK(KVStorePush(kv, 0, NULL, NULL, 0)); /* an empty push is a no-op */
  UNCHANGED();

  /* unknown key after a valid one: the valid one is not written */
  int mixed_known[2] = {1, 99};
  KVArrayHandle two_vals[2] = {one, one};
  CHECK_ERR(KVStorePush(kv, 2, mixed_known, two_vals, 0), KV_ERR_UNKNOWN_KEY, "key 99 is not initialised");
  UNCHANGED();
  KVArrayHandle outs2[2] = {out, out};
  CHECK_ERR(KVStorePull(kv, 2, mixed_known, outs2, 0), KV_ERR_UNKNOWN_KEY, "99");
  CHECK(all_f32(out, -5)); /* outputs of a failed pull are not written */

  /* duplicate init (also together with a fresh key, which must not be created) */
  int dup[2] = {3, 1};
  CHECK_ERR(KVStoreInit(kv, 2, dup, two_vals), KV_ERR_DUPLICATE_KEY, "duplicate init of key 1");
  UNCHANGED();
  int three = 3;
  CHECK_ERR(KVStorePull(kv, 1, &three, &out, 0), KV_ERR_UNKNOWN_KEY, "3");
  int same[2] = {4, 4};
  CHECK_ERR(KVStoreInit(kv, 2, same, two_vals), KV_ERR_INVALID_ARGUMENT, "more than once");

  /* mixed key kinds */
  const char* sk = "1";
  CHECK_ERR(KVStorePushStr(kv, 1, &sk, &one, 0), KV_ERR_KEY_KIND_MISMATCH, "mixed key kinds");
  CHECK_ERR(KVStoreInitStr(kv, 1, &sk, &one), KV_ERR_KEY_KIND_MISMATCH, "\"1\"");
  UNCHANGED();

  /* shape and dtype mismatches, in the second value of a list */
  KVArrayHandle bad_shape = NULL, bad_dtype = NULL;
  int64_t s32[2] = {3, 2};
  KVArrayCreate(s32, 2, KV_FLOAT32, KV_CPU, 0, &bad_shape);
  KVArrayCreate(kShape23, 2, KV_FLOAT64, KV_CPU, 0, &bad_dtype);
  KVArrayHandle sv[2] = {one, bad_shape}, dv[2] = {one, bad_dtype};
  CHECK_ERR(KVStorePush(kv, 2, keys, sv, 0), KV_ERR_SHAPE_MISMATCH, "push to key 2: shape mismatch: expected (2,3), got (3,2)");
  UNCHANGED();
  CHECK_ERR(KVStorePush(kv, 2, keys, dv, 0), KV_ERR_DTYPE_MISMATCH, "expected float32, got float64");
  UNCHANGED();
  CHECK_ERR(KVStorePull(kv, 1, keys, &bad_shape, 0), KV_ERR_SHAPE_MISMATCH, "pull of key 1");

  /* updater failure on the second key of a call: neither key changes */
  UpdaterState st = {0, -1, 0, 2, 1.0};
  KVStoreSetUpdater(kv, scaled_add, &st, NULL);
  CHECK_ERR(KVStorePush(kv, 2, keys, two_vals, 0), KV_ERR_CALLBACK, "updater returned 1 for key 2");
  CHECK(st.calls == 2);
  UNCHANGED();
  KVArrayHandle pp_outs[2] = {out, out};
  CHECK_ERR(KVStorePushPull(kv, 2, keys, two_vals, 2, keys, pp_outs, 0), KV_ERR_CALLBACK, "key 2");
  CHECK(all_f32(out, -5));
  UNCHANGED();
  /* and the store still works afterwards */
  CHECK_OK(KVStorePush(kv, 1, keys, &one, 0));
  CHECK(stored_is(kv, 1, 11) && stored_is(kv, 2, 20));

  KVArrayFree(bad_shape), KVArrayFree(bad_dtype), KVArrayFree(one), KVArrayFree(out);
  KVArrayFree(v[0]), KVArrayFree(v[1]);
  KVStoreFree(kv);
#undef UNCHANGED
}

/* KVStoreIsCapable: "optimizer" (in any case) for every in-process type; an unknown name is
 * refused with the known ones listed and leaves *out_capable alone. */
static void test_capabilities(void) {
  const char* types[] = {"local", "local_update_cpu", "local_allreduce_cpu", "device", "local_allreduce_device"};
  for (int i = 0; i < 5; ++i) {
    KVStoreHandle kv = NULL;
    CHECK_OK(KVStoreCreate(types[i], &kv));
    int has = -1;
    CHECK_OK(KVStoreIsCapable(kv, KV_CAPABILITY_OPTIMIZER, &has));
    CHECK(has == 1);
    has = -1;
    CHECK_OK(KVStoreIsCapable(kv, "OPTIMIZER", &has)); /* names are case-insensitive */
    CHECK(has == 1);
    has = -1;
    CHECK_ERR(KVStoreIsCapable(kv, "optimizers", &has), KV_ERR_INVALID_ARGUMENT,
              "unknown capability \"optimizers\"; known capabilities: \"optimizer\"");
    CHECK(has == -1);
    CHECK_ERR(KVStoreIsCapable(kv, "", &has), KV_ERR_INVALID_ARGUMENT, "\"optimizer\"");
    CHECK_ERR(KVStoreIsCapable(kv, NULL, &has), KV_ERR_NULL_POINTER, "capability");
    CHECK_ERR(KVStoreIsCapable(kv, "optimizer", NULL), KV_ERR_NULL_POINTER, "out_capable");
    CHECK(has == -1);
    CHECK_OK(KVStoreFree(kv));
  }
  int has = -1;
  CHECK_ERR(KVStoreIsCapable(NULL, "optimizer", &has), KV_ERR_NULL_POINTER, "store");
  if (KVHasFeature(KV_FEATURE_NCCL) && KVHasFeature(KV_FEATURE_CUDA)) {
    int gpus = 0;
    KVGetGpuCount(&gpus);
    KVStoreHandle kv = NULL;
    if (gpus > 0 && KVStoreCreate("nccl", &kv) == 0) {
      CHECK_OK(KVStoreIsCapable(kv, "optimizer", &has));
      CHECK(has == 1);
      CHECK_OK(KVStoreFree(kv));
    }
  }
}

int main(void) {
  test_types();
  test_capabilities();
  test_push_pull_semantics();
  test_many_keys();
  test_dtypes();
  test_updaters();
  test_errors_leave_store_unchanged();
  return check_summary();
}
