/* test_row_sparse_store.c - row_sparse values in the in-process stores through the public C
 * ABI: init with a row_sparse value, pushes summed by the union of rows (assign, callback
 * updaters, built-in optimizers), mixed dense and row_sparse pushes, row_sparse_pull (row
 * ids in any order, duplicates, any dtype, several outputs, string keys), the promise
 * that every failing call changes nothing, and pushes and pulls of one key from several
 * threads at once. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdint.h>

#include "../common/arrays.h"

#define ROWS 6
#define COLS 2
static const int64_t kShape[2] = {ROWS, COLS};
static const char* kStores[2] = {"local", "device"};

/* A float32 (6,2) row_sparse array with rows `ids`, row i filled with vals[i]. */
static KVArrayHandle rsp(const int64_t* ids, int n, const float* vals) {
  KVArrayHandle a = NULL;
  REQUIRE_OK(KVArrayCreateRowSparse(kShape, 2, KV_FLOAT32, KV_CPU, 0, ids, n, &a));
  float block[ROWS * COLS];
  for (int i = 0; i < n; ++i) block[2 * i] = vals[i], block[2 * i + 1] = vals[i] + 0.5f;
  if (n > 0) REQUIRE_OK(KVArrayCopyFromHost(a, block, (size_t)n * COLS * sizeof(float)));
  return a;
}

/* A float32 (6,2) dense array whose row r holds (rows[r], rows[r] + 0.5), or zeros where
 * rows[r] is 0. */
static KVArrayHandle dense(const float* rows) {
  KVArrayHandle a = NULL;
  REQUIRE_OK(KVArrayCreate(kShape, 2, KV_FLOAT32, KV_CPU, 0, &a));
  float data[ROWS * COLS];
  for (int r = 0; r < ROWS; ++r) data[2 * r] = rows[r], data[2 * r + 1] = rows[r] == 0 ? 0 : rows[r] + 0.5f;
  REQUIRE_OK(KVArrayCopyFromHost(a, data, sizeof data));
  return a;
}

/* 1 when pulling `key` dense gives row r = (want[r], want[r] + 0.5) (zeros where 0). */
static int stored_rows_are(KVStoreHandle kv, int key, const float* want) {
  KVArrayHandle out = NULL;
  REQUIRE_OK(KVArrayCreate(kShape, 2, KV_FLOAT32, KV_CPU, 0, &out));
  float got[ROWS * COLS];
  int ok = KVStorePull(kv, 1, &key, &out, 0) == 0 && KVArrayCopyToHost(out, got, sizeof got) == 0;
  for (int r = 0; ok && r < ROWS; ++r) {
    const float second = want[r] == 0 ? 0 : want[r] + 0.5f;
    if (got[2 * r] != want[r] || got[2 * r + 1] != second) {
      fprintf(stderr, "row %d is (%g, %g), want (%g, %g)\n", r, got[2 * r], got[2 * r + 1], want[r], second);
      ok = 0;
    }
  }
  KVArrayFree(out);
  return ok;
}

/* 1 when the row_sparse `a` holds exactly rows `ids` with row i = (vals[i], vals[i] + 0.5). */
static int rows_are(KVArrayHandle a, const int64_t* ids, int n, const float* vals) {
  int64_t num = -1, got_ids[ROWS];
  float block[ROWS * COLS];
  if (KVArrayGetNumRows(a, &num) != 0 || num != n) {
    fprintf(stderr, "%lld rows, want %d\n", (long long)num, n);
    return 0;
  }
  if (KVArrayGetRowIds(a, got_ids, ROWS) != 0) return 0;
  if (n > 0 && KVArrayCopyToHost(a, block, (size_t)n * COLS * sizeof(float)) != 0) return 0;
  for (int i = 0; i < n; ++i) {
    if (got_ids[i] != ids[i] || block[2 * i] != vals[i] || block[2 * i + 1] != vals[i] + 0.5f) {
      fprintf(stderr, "row %d: id %lld (%g, %g), want id %lld (%g, %g)\n", i, (long long)got_ids[i], block[2 * i],
              block[2 * i + 1], (long long)ids[i], vals[i], vals[i] + 0.5f);
      return 0;
    }
  }
  return 1;
}

/* A dense row_ids array of `dtype` holding `n` values. */
static KVArrayHandle row_ids(int dtype, const double* vals, int64_t n) {
  KVArrayHandle a = NULL;
  REQUIRE_OK(KVArrayCreate(&n, 1, dtype, KV_CPU, 0, &a));
  unsigned char bytes[64 * 8];
  for (int64_t i = 0; i < n; ++i) {
    switch (dtype) {
      case KV_FLOAT32: ((float*)bytes)[i] = (float)vals[i]; break;
      case KV_FLOAT64: ((double*)bytes)[i] = vals[i]; break;
      case KV_INT32: ((int32_t*)bytes)[i] = (int32_t)vals[i]; break;
      case KV_UINT8: ((uint8_t*)bytes)[i] = (uint8_t)vals[i]; break;
      default: ((int64_t*)bytes)[i] = (int64_t)vals[i]; break;
    }
  }
  REQUIRE_OK(KVArrayCopyFromHost(a, bytes, (size_t)n * KVDTypeSize(dtype)));
  return a;
}

static void test_init_and_assign(const char* type) {
  check_set_context("%s", type);
  KVStoreHandle kv = NULL;
  REQUIRE_OK(KVStoreCreate(type, &kv));
  const int64_t ids[2] = {1, 4};
  const float vals[2] = {3, 5};
  KVArrayHandle init = rsp(ids, 2, vals);
  int key = 7;
  CHECK_OK(KVStoreInit(kv, 1, &key, &init));
  const float want_init[ROWS] = {0, 3, 0, 0, 5, 0};
  CHECK(stored_rows_are(kv, key, want_init)); /* stored densified */

  /* two values of one key: summed by the union of rows; assign zeroes the rest */
  const int64_t ids_a[2] = {0, 4}, ids_b[3] = {2, 4, 5};
  const float va[2] = {1, 2}, vb[3] = {10, 20, 30};
  KVArrayHandle pushes[2] = {rsp(ids_a, 2, va), rsp(ids_b, 3, vb)};
  int keys[2] = {key, key};
  CHECK_OK(KVStorePush(kv, 2, keys, pushes, 0));
  const float sum[ROWS] = {1, 0, 10, 0, 22.5f, 30};
  /* row 4 sums (2, 2.5) + (20, 20.5) = (22, 23): check it by hand below */
  KVArrayHandle out = NULL;
  REQUIRE_OK(KVArrayCreate(kShape, 2, KV_FLOAT32, KV_CPU, 0, &out));
  CHECK_OK(KVStorePull(kv, 1, &key, &out, 0));
  float got[ROWS * COLS];
  KVArrayCopyToHost(out, got, sizeof got);
  const float want[ROWS * COLS] = {1, 1.5f, 0, 0, 10, 10.5f, 0, 0, 22, 23, 30, 30.5f};
  CHECK(memcmp(got, want, sizeof got) == 0);
  (void)sum;

  /* a push with no rows assigns zeros */
  KVArrayHandle empty = rsp(NULL, 0, NULL);
  CHECK_OK(KVStorePush(kv, 1, &key, &empty, 0));
  const float zeros[ROWS] = {0};
  CHECK(stored_rows_are(kv, key, zeros));

  /* mixing dense and row_sparse values for one key sums them dense */
  const float drows[ROWS] = {1, 1, 1, 1, 1, 1};
  KVArrayHandle mixed[2] = {dense(drows), rsp(ids, 2, vals)};
  CHECK_OK(KVStorePush(kv, 2, keys, mixed, 0));
  CHECK_OK(KVStorePull(kv, 1, &key, &out, 0));
  KVArrayCopyToHost(out, got, sizeof got);
  const float want_mixed[ROWS * COLS] = {1, 1.5f, 4, 5, 1, 1.5f, 1, 1.5f, 6, 7, 1, 1.5f};
  CHECK(memcmp(got, want_mixed, sizeof got) == 0);

  /* pushpull and broadcast take row_sparse values; their outputs are dense */
  CHECK_OK(KVStorePushPull(kv, 1, &key, &init, 1, &key, &out, 0));
  CHECK(stored_rows_are(kv, key, want_init));
  int key2 = 8;
  CHECK_OK(KVStoreBroadcast(kv, 1, &key2, &init, 1, &key2, &out, 0));
  CHECK(stored_rows_are(kv, key2, want_init));
  CHECK_ERR(KVStorePull(kv, 1, &key, &init, 0), KV_ERR_NOT_SUPPORTED, "row_sparse");
  CHECK_ERR(KVStorePushPull(kv, 1, &key, &out, 1, &key, &init, 0), KV_ERR_NOT_SUPPORTED, "row_sparse");
  CHECK(stored_rows_are(kv, key, want_init));

  KVArrayFree(init), KVArrayFree(pushes[0]), KVArrayFree(pushes[1]), KVArrayFree(out), KVArrayFree(empty);
  KVArrayFree(mixed[0]), KVArrayFree(mixed[1]);
  KVStoreFree(kv);
  check_set_context("%s", "");
}

/* A callback updater sees the row_sparse sum and the whole stored value. */
typedef struct {
  int calls;
  int stype;
  int64_t num_rows;
  int64_t ids[ROWS];
  float block[ROWS * COLS];
  int stored_stype;
} SeenRecv;

static int record_and_add(int key, KVArrayHandle recv, KVArrayHandle stored, void* user_data) {
  (void)key;
  SeenRecv* seen = (SeenRecv*)user_data;
  seen->calls++;
  KVArrayGetStorageType(recv, &seen->stype);
  KVArrayGetStorageType(stored, &seen->stored_stype);
  if (KVArrayGetNumRows(recv, &seen->num_rows) != 0) return 1;
  KVArrayGetRowIds(recv, seen->ids, ROWS);
  KVArrayCopyToHost(recv, seen->block, (size_t)seen->num_rows * COLS * sizeof(float));
  /* stored += recv, row by row */
  float* data = NULL;
  if (KVArrayGetData(stored, (void**)&data) != 0) return 2;
  for (int64_t i = 0; i < seen->num_rows; ++i) {
    data[seen->ids[i] * COLS] += seen->block[i * COLS];
    data[seen->ids[i] * COLS + 1] += seen->block[i * COLS + 1];
  }
  return 0;
}

static int fail_after_scribbling(int key, KVArrayHandle recv, KVArrayHandle stored, void* user_data) {
  (void)key, (void)recv, (void)user_data;
  KVArrayFill(stored, -999);
  return 5;
}

static void test_updaters(const char* type) {
  check_set_context("%s", type);
  KVStoreHandle kv = NULL;
  REQUIRE_OK(KVStoreCreate(type, &kv));
  const float ones[ROWS] = {1, 1, 1, 1, 1, 1};
  KVArrayHandle init = dense(ones);
  int key = 1;
  CHECK_OK(KVStoreInit(kv, 1, &key, &init));
  SeenRecv seen;
  memset(&seen, 0, sizeof seen);
  CHECK_OK(KVStoreSetUpdater(kv, record_and_add, &seen, NULL));
  const int64_t ids_a[2] = {3, 5}, ids_b[1] = {3};
  const float va[2] = {2, 4}, vb[1] = {10};
  KVArrayHandle pushes[2] = {rsp(ids_a, 2, va), rsp(ids_b, 1, vb)};
  int keys[2] = {key, key};
  CHECK_OK(KVStorePush(kv, 2, keys, pushes, 0));
  CHECK(seen.calls == 1 && seen.stype == KV_STYPE_ROW_SPARSE && seen.stored_stype == KV_STYPE_DEFAULT);
  CHECK(seen.num_rows == 2 && seen.ids[0] == 3 && seen.ids[1] == 5);
  CHECK(seen.block[0] == 12 && seen.block[1] == 13 && seen.block[2] == 4 && seen.block[3] == 4.5f);
  KVArrayHandle out = NULL;
  float got[ROWS * COLS];
  REQUIRE_OK(KVArrayCreate(kShape, 2, KV_FLOAT32, KV_CPU, 0, &out));
  CHECK_OK(KVStorePull(kv, 1, &key, &out, 0));
  KVArrayCopyToHost(out, got, sizeof got);
  const float want[ROWS * COLS] = {1, 1.5f, 1, 1.5f, 1, 1.5f, 13, 14.5f, 1, 1.5f, 5, 6};
  CHECK(memcmp(got, want, sizeof got) == 0);

  /* a failing updater leaves the value as it was */
  CHECK_OK(KVStoreSetUpdater(kv, fail_after_scribbling, NULL, NULL));
  CHECK_ERR(KVStorePush(kv, 1, &key, &pushes[0], 0), KV_ERR_CALLBACK, "returned 5");
  CHECK_OK(KVStorePull(kv, 1, &key, &out, 0));
  KVArrayCopyToHost(out, got, sizeof got);
  CHECK(memcmp(got, want, sizeof got) == 0);
  KVStoreFree(kv);

  /* a built-in optimizer without a lazy update gets the sum dense: the same result as
   * pushing the dense cast (adagrad keeps state, so a second push checks it too) */
  KVStoreHandle a = NULL, b = NULL;
  REQUIRE_OK(KVStoreCreate(type, &a));
  REQUIRE_OK(KVStoreCreate(type, &b));
  CHECK_OK(KVStoreInit(a, 1, &key, &init));
  CHECK_OK(KVStoreInit(b, 1, &key, &init));
  CHECK_OK(KVStoreSetOptimizer(a, "adagrad(learning_rate=0.1)"));
  CHECK_OK(KVStoreSetOptimizer(b, "adagrad(learning_rate=0.1)"));
  KVArrayHandle cast = NULL;
  REQUIRE_OK(KVArrayCastStorage(pushes[0], KV_STYPE_DEFAULT, &cast));
  float ga[ROWS * COLS], gb[ROWS * COLS];
  for (int round = 0; round < 2; ++round) {
    CHECK_OK(KVStorePush(a, 1, &key, &pushes[0], 0));
    CHECK_OK(KVStorePush(b, 1, &key, &cast, 0));
  }
  CHECK_OK(KVStorePull(a, 1, &key, &out, 0));
  KVArrayCopyToHost(out, ga, sizeof ga);
  CHECK_OK(KVStorePull(b, 1, &key, &out, 0));
  KVArrayCopyToHost(out, gb, sizeof gb);
  CHECK(memcmp(ga, gb, sizeof ga) == 0 && ga[0] == 1.0f && ga[6] != 1.0f);
  KVStoreFree(a), KVStoreFree(b);
  KVArrayFree(init), KVArrayFree(pushes[0]), KVArrayFree(pushes[1]), KVArrayFree(out), KVArrayFree(cast);
  check_set_context("%s", "");
}

/* sgd's lazy update (the default) changes only the pushed rows; lazy_update=0 applies the
 * sum dense, so weight decay also shrinks the rows nobody pushed. */
static void test_lazy_update(const char* type) {
  check_set_context("%s", type);
  const float twos[ROWS] = {2, 2, 2, 2, 2, 2};
  KVArrayHandle init = dense(twos);
  const int64_t ids[2] = {1, 4};
  const float g[2] = {1, 3};
  KVArrayHandle grad = rsp(ids, 2, g);
  const char* specs[2] = {"sgd(learning_rate=0.5,wd=0.1)", "sgd(learning_rate=0.5,wd=0.1,lazy_update=0)"};
  float got[2][ROWS * COLS];
  for (int s = 0; s < 2; ++s) {
    KVStoreHandle kv = NULL;
    REQUIRE_OK(KVStoreCreate(type, &kv));
    int key = 9;
    CHECK_OK(KVStoreInit(kv, 1, &key, &init));
    CHECK_OK(KVStoreSetOptimizer(kv, specs[s]));
    CHECK_OK(KVStorePush(kv, 1, &key, &grad, 0));
    KVArrayHandle out = NULL;
    REQUIRE_OK(KVArrayCreate(kShape, 2, KV_FLOAT32, KV_CPU, 0, &out));
    CHECK_OK(KVStorePull(kv, 1, &key, &out, 0));
    KVArrayCopyToHost(out, got[s], sizeof got[s]);
    KVArrayFree(out);
    KVStoreFree(kv);
  }
  /* pushed rows: the same in both; row 1 = 2 - 0.5 * (1 + 0.1 * 2) = 1.4 */
  for (int r = 0; r < ROWS; ++r) {
    const int pushed = r == 1 || r == 4;
    for (int c = 0; c < COLS; ++c) {
      const float lazy = got[0][r * COLS + c], dense_rule = got[1][r * COLS + c];
      const float w0 = c == 0 ? 2 : 2.5f;
      if (pushed) {
        CHECK_MSG(lazy == dense_rule, "row %d col %d: lazy %g, dense %g", r, c, lazy, dense_rule);
      } else {
        CHECK_MSG(lazy == w0 && dense_rule < w0, "row %d col %d: lazy %g (want %g), dense %g", r, c, lazy, w0,
                  dense_rule);
      }
    }
  }
  CHECK(fabsf(got[0][2] - 1.4f) < 1e-6f);
  KVArrayFree(init), KVArrayFree(grad);
  check_set_context("%s", "");
}

static void test_row_sparse_pull(const char* type) {
  check_set_context("%s", type);
  KVStoreHandle kv = NULL;
  REQUIRE_OK(KVStoreCreate(type, &kv));
  const float rows[ROWS] = {1, 2, 3, 4, 5, 6};
  KVArrayHandle init = dense(rows);
  int key = 2;
  CHECK_OK(KVStoreInit(kv, 1, &key, &init));
  KVArrayHandle out = rsp(NULL, 0, NULL);
  /* any order, duplicates, any integral dtype */
  const int dtypes[5] = {KV_INT64, KV_INT32, KV_UINT8, KV_FLOAT32, KV_FLOAT64};
  const double want_ids[5] = {4, 1, 4, 0, 1};
  for (int d = 0; d < 5; ++d) {
    KVArrayHandle ids = row_ids(dtypes[d], want_ids, 5);
    CHECK_OK(KVStoreRowSparsePull(kv, 1, &key, &out, &ids, 0));
    const int64_t expect[3] = {0, 1, 4};
    const float vals[3] = {1, 2, 5};
    CHECK_MSG(rows_are(out, expect, 3, vals), "row_ids of %s", KVDTypeName(dtypes[d]));
    KVArrayFree(ids);
  }
  /* the output's rows are replaced, also by fewer rows and by none */
  const double one[1] = {5};
  KVArrayHandle ids1 = row_ids(KV_INT64, one, 1);
  CHECK_OK(KVStoreRowSparsePull(kv, 1, &key, &out, &ids1, 0));
  const int64_t e5[1] = {5};
  const float v6[1] = {6};
  CHECK(rows_are(out, e5, 1, v6));
  KVArrayHandle none = row_ids(KV_INT64, NULL, 0);
  CHECK_OK(KVStoreRowSparsePull(kv, 1, &key, &out, &none, 0));
  CHECK(rows_are(out, NULL, 0, NULL));

  /* several outputs of one key, each with its own row_ids, or one row_ids for all */
  KVArrayHandle outs[3] = {rsp(NULL, 0, NULL), rsp(NULL, 0, NULL), rsp(NULL, 0, NULL)};
  const double two[2] = {2, 3};
  KVArrayHandle ids2 = row_ids(KV_INT32, two, 2);
  KVArrayHandle per[3] = {ids1, ids2, ids1};
  int keys[3] = {key, key, key};
  CHECK_OK(KVStoreRowSparsePull(kv, 3, keys, outs, per, 0));
  const int64_t e23[2] = {2, 3};
  const float v34[2] = {3, 4};
  CHECK(rows_are(outs[0], e5, 1, v6) && rows_are(outs[1], e23, 2, v34) && rows_are(outs[2], e5, 1, v6));

  /* string keys */
  KVStoreHandle skv = NULL;
  REQUIRE_OK(KVStoreCreate(type, &skv));
  const char* name = "embedding";
  CHECK_OK(KVStoreInitStr(skv, 1, &name, &init));
  CHECK_OK(KVStoreRowSparsePullStr(skv, 1, &name, &out, &ids2, 0));
  CHECK(rows_are(out, e23, 2, v34));
  CHECK_ERR(KVStoreRowSparsePull(skv, 1, &key, &out, &ids2, 0), KV_ERR_KEY_KIND_MISMATCH, "string keys");
  KVStoreFree(skv);

  KVArrayFree(init), KVArrayFree(out), KVArrayFree(ids1), KVArrayFree(ids2), KVArrayFree(none);
  for (int i = 0; i < 3; ++i) KVArrayFree(outs[i]);
  KVStoreFree(kv);
  check_set_context("%s", "");
}

/* Every refusal names its reason and changes no output and no stored value. */
static void test_errors_change_nothing(void) {
  KVStoreHandle kv = NULL;
  REQUIRE_OK(KVStoreCreate("local", &kv));
  const float rows[ROWS] = {1, 2, 3, 4, 5, 6};
  KVArrayHandle init = dense(rows);
  int key = 0, other = 1;
  int both[2] = {0, 1};
  KVArrayHandle inits[2] = {init, init};
  CHECK_OK(KVStoreInit(kv, 2, both, inits));
  const int64_t start_ids[1] = {3};
  const float start_vals[1] = {4};
  KVArrayHandle out = rsp(start_ids, 1, start_vals), out2 = rsp(start_ids, 1, start_vals);
  const double good[2] = {0, 1}, bad_range[2] = {0, 6}, negative[1] = {-1}, fraction[2] = {1, 2.5};
  KVArrayHandle ok_ids = row_ids(KV_INT64, good, 2);
  KVArrayHandle range_ids = row_ids(KV_INT64, bad_range, 2);
  KVArrayHandle neg_ids = row_ids(KV_INT32, negative, 1);
  KVArrayHandle frac_ids = row_ids(KV_FLOAT32, fraction, 2);
  KVArrayHandle nan_ids = NULL;
  const int64_t one = 1;
  REQUIRE_OK(KVArrayCreate(&one, 1, KV_FLOAT64, KV_CPU, 0, &nan_ids));
  const double nan_value = NAN;
  REQUIRE_OK(KVArrayCopyFromHost(nan_ids, &nan_value, sizeof nan_value));
  KVArrayHandle dense_out = dense(rows);
  KVArrayHandle rsp_ids = rsp(start_ids, 1, start_vals);
  int64_t small_shape[2] = {5, 2};
  KVArrayHandle wrong_shape = NULL, wrong_dtype = NULL;
  REQUIRE_OK(KVArrayCreateRowSparse(small_shape, 2, KV_FLOAT32, KV_CPU, 0, NULL, 0, &wrong_shape));
  REQUIRE_OK(KVArrayCreateRowSparse(kShape, 2, KV_FLOAT64, KV_CPU, 0, NULL, 0, &wrong_dtype));

  /* the second item of a call fails: the first output is unchanged too */
  KVArrayHandle pair_outs[2] = {out, out2};
  KVArrayHandle pair_ids[2][2] = {{ok_ids, range_ids}, {ok_ids, neg_ids}};
  CHECK_ERR(KVStoreRowSparsePull(kv, 2, both, pair_outs, pair_ids[0], 0), KV_ERR_INVALID_ARGUMENT,
            "row id 6 (element 1 of row_ids) is outside [0, 6)");
  CHECK_ERR(KVStoreRowSparsePull(kv, 2, both, pair_outs, pair_ids[1], 0), KV_ERR_INVALID_ARGUMENT,
            "row id -1");
  KVArrayHandle frac_pair[2] = {ok_ids, frac_ids};
  CHECK_ERR(KVStoreRowSparsePull(kv, 2, both, pair_outs, frac_pair, 0), KV_ERR_INVALID_ARGUMENT,
            "2.5 (element 1 of row_ids) is not an integer");
  CHECK_ERR(KVStoreRowSparsePull(kv, 1, &key, &out, &nan_ids, 0), KV_ERR_INVALID_ARGUMENT, "not an integer");
  KVArrayHandle dense_pair[2] = {out, dense_out};
  CHECK_ERR(KVStoreRowSparsePull(kv, 2, both, dense_pair, pair_ids[0], 0), KV_ERR_INVALID_ARGUMENT,
            "output 1 (key 1) is float32(6,2)@cpu(0), not row_sparse");
  KVArrayHandle rsp_pair[2] = {ok_ids, rsp_ids};
  CHECK_ERR(KVStoreRowSparsePull(kv, 2, both, pair_outs, rsp_pair, 0), KV_ERR_INVALID_ARGUMENT,
            "row_ids 1 (key 1) is row_sparse");
  KVArrayHandle shape_pair[2] = {out, wrong_shape}, dtype_pair[2] = {out, wrong_dtype};
  KVArrayHandle ok_pair[2] = {ok_ids, ok_ids};
  CHECK_ERR(KVStoreRowSparsePull(kv, 2, both, shape_pair, ok_pair, 0), KV_ERR_SHAPE_MISMATCH, "(5,2)");
  CHECK_ERR(KVStoreRowSparsePull(kv, 2, both, dtype_pair, ok_pair, 0), KV_ERR_DTYPE_MISMATCH, "float64");
  int unknown[2] = {0, 42};
  CHECK_ERR(KVStoreRowSparsePull(kv, 2, unknown, pair_outs, ok_pair, 0), KV_ERR_UNKNOWN_KEY, "key 42");
  CHECK_ERR(KVStoreRowSparsePull(kv, -1, both, pair_outs, ok_pair, 0), KV_ERR_INVALID_ARGUMENT, "negative");
  CHECK_ERR(KVStoreRowSparsePull(kv, 1, both, pair_outs, NULL, 0), KV_ERR_NULL_POINTER, "row_ids");
  CHECK_ERR(KVStoreRowSparsePull(NULL, 1, both, pair_outs, ok_pair, 0), KV_ERR_NULL_POINTER, "store");
  CHECK(rows_are(out, start_ids, 1, start_vals) && rows_are(out2, start_ids, 1, start_vals));

  /* pushes: a bad value anywhere in the call changes no key */
  const int64_t ids_a[1] = {2};
  const float va[1] = {9};
  KVArrayHandle good_push = rsp(ids_a, 1, va);
  KVArrayHandle push_pair[2] = {good_push, wrong_shape};
  CHECK_ERR(KVStorePush(kv, 2, both, push_pair, 0), KV_ERR_SHAPE_MISMATCH, "push to key 1");
  KVArrayHandle dtype_push[2] = {good_push, wrong_dtype};
  CHECK_ERR(KVStorePush(kv, 2, both, dtype_push, 0), KV_ERR_DTYPE_MISMATCH, "push to key 1");
  /* a failing updater on the dense key of a call leaves the row_sparse key unchanged */
  CHECK_OK(KVStoreSetUpdater(kv, fail_after_scribbling, NULL, NULL));
  KVArrayHandle mixed_keys[2] = {good_push, init};
  CHECK_ERR(KVStorePush(kv, 2, both, mixed_keys, 0), KV_ERR_CALLBACK, "returned 5");
  CHECK(stored_rows_are(kv, key, rows) && stored_rows_are(kv, other, rows));
  CHECK(rows_are(out, start_ids, 1, start_vals));

  KVArrayFree(init), KVArrayFree(out), KVArrayFree(out2), KVArrayFree(ok_ids), KVArrayFree(range_ids);
  KVArrayFree(neg_ids), KVArrayFree(frac_ids), KVArrayFree(nan_ids), KVArrayFree(dense_out);
  KVArrayFree(rsp_ids), KVArrayFree(wrong_shape), KVArrayFree(wrong_dtype), KVArrayFree(good_push);
  KVStoreFree(kv);
}

/* Several threads push row_sparse values of one key (a callback adds their rows) while
 * others pull rows of it: no push is lost and no pulled row is ever half-updated. */
enum { kPushers = 3, kPullers = 2, kRounds = 150, kBigRows = 64, kBigCols = 16 };
static KVStoreHandle g_kv;

static int add_rows(int key, KVArrayHandle recv, KVArrayHandle stored, void* user_data) {
  (void)key, (void)user_data;
  int64_t n = 0, ids[kBigRows];
  float* w = NULL;
  static __thread float block[kBigRows * kBigCols];
  if (KVArrayGetNumRows(recv, &n) || KVArrayGetRowIds(recv, ids, kBigRows) ||
      KVArrayCopyToHost(recv, block, (size_t)n * kBigCols * sizeof(float)) || KVArrayGetData(stored, (void**)&w)) {
    return 1;
  }
  for (int64_t i = 0; i < n; ++i) {
    for (int c = 0; c < kBigCols; ++c) w[ids[i] * kBigCols + c] += block[i * kBigCols + c];
  }
  return 0;
}

static void* pusher(void* arg) {
  (void)arg;
  const int64_t shape[2] = {kBigRows, kBigCols};
  int64_t ids[kBigRows];
  for (int r = 0; r < kBigRows; ++r) ids[r] = r;
  KVArrayHandle g = NULL;
  REQUIRE_OK(KVArrayCreateRowSparse(shape, 2, KV_FLOAT32, KV_CPU, 0, ids, kBigRows, &g));
  float ones[kBigRows * kBigCols];
  for (int i = 0; i < kBigRows * kBigCols; ++i) ones[i] = 1;
  REQUIRE_OK(KVArrayCopyFromHost(g, ones, sizeof ones));
  int key = 0;
  long failures = 0;
  for (int i = 0; i < kRounds; ++i) failures += KVStorePush(g_kv, 1, &key, &g, 0) != 0;
  KVArrayFree(g);
  return (void*)failures;
}

static void* puller(void* arg) {
  (void)arg;
  const int64_t shape[2] = {kBigRows, kBigCols};
  const int64_t two = 2, want[2] = {kBigRows - 1, 0};
  KVArrayHandle out = NULL, ids = NULL;
  REQUIRE_OK(KVArrayCreateRowSparse(shape, 2, KV_FLOAT32, KV_CPU, 0, NULL, 0, &out));
  REQUIRE_OK(KVArrayCreate(&two, 1, KV_INT64, KV_CPU, 0, &ids));
  REQUIRE_OK(KVArrayCopyFromHost(ids, want, sizeof want));
  int key = 0;
  long failures = 0;
  float block[2 * kBigCols];
  for (int i = 0; i < kRounds; ++i) {
    if (KVStoreRowSparsePull(g_kv, 1, &key, &out, &ids, 0) != 0 ||
        KVArrayCopyToHost(out, block, sizeof block) != 0) {
      ++failures;
      continue;
    }
    for (int e = 1; e < 2 * kBigCols; ++e) failures += block[e] != block[0];
  }
  KVArrayFree(out), KVArrayFree(ids);
  return (void*)failures;
}

static void test_threads(void) {
  REQUIRE_OK(KVStoreCreate("local", &g_kv));
  const int64_t shape[2] = {kBigRows, kBigCols};
  KVArrayHandle zero = NULL;
  REQUIRE_OK(KVArrayCreate(shape, 2, KV_FLOAT32, KV_CPU, 0, &zero));
  int key = 0;
  CHECK_OK(KVStoreInit(g_kv, 1, &key, &zero));
  CHECK_OK(KVStoreSetUpdater(g_kv, add_rows, NULL, NULL));
  pthread_t threads[kPushers + kPullers];
  for (int t = 0; t < kPushers + kPullers; ++t) {
    REQUIRE(pthread_create(&threads[t], NULL, t < kPushers ? pusher : puller, NULL) == 0, "pthread_create");
  }
  for (int t = 0; t < kPushers + kPullers; ++t) {
    void* failures = NULL;
    pthread_join(threads[t], &failures);
    CHECK_MSG(failures == NULL, "thread %d: %ld failures", t, (long)failures);
  }
  float got[kBigRows * kBigCols];
  CHECK_OK(KVStorePull(g_kv, 1, &key, &zero, 0));
  KVArrayCopyToHost(zero, got, sizeof got);
  int all = 1;
  for (int i = 0; i < kBigRows * kBigCols; ++i) all &= got[i] == (float)(kPushers * kRounds);
  CHECK_MSG(all, "element 0 is %g, want %d", got[0], kPushers * kRounds);
  KVArrayFree(zero);
  KVStoreFree(g_kv);
}

int main(void) {
  for (int s = 0; s < 2; ++s) {
    test_init_and_assign(kStores[s]);
    test_updaters(kStores[s]);
    test_lazy_update(kStores[s]);
    test_row_sparse_pull(kStores[s]);
  }
  test_errors_change_nothing();
  test_threads();
  return check_summary();
}
