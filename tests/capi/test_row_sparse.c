/* test_row_sparse.c - row_sparse arrays through the public C ABI: creation, the storage
 * type, row ids, the data block seen through the array functions, casts between storage
 * types, and every refusal (dense-only functions, stores that do not take them). */
#include <math.h>
#include <stdint.h>

#include "../common/arrays.h"

static const int64_t kShape53[2] = {5, 3};

/* A float32 (5,3) row_sparse array with rows `ids` whose row i holds 10*id + column. */
static KVArrayHandle make_rsp(const int64_t* ids, int64_t n) {
  KVArrayHandle a = NULL;
  REQUIRE_OK(KVArrayCreateRowSparse(kShape53, 2, KV_FLOAT32, KV_CPU, 0, ids, n, &a));
  float block[15];
  for (int64_t i = 0; i < n; ++i) {
    for (int c = 0; c < 3; ++c) block[i * 3 + c] = (float)(10 * ids[i] + c);
  }
  if (n > 0) REQUIRE_OK(KVArrayCopyFromHost(a, block, (size_t)n * 3 * sizeof(float)));
  return a;
}

static void test_create_and_query(void) {
  const int64_t ids[2] = {1, 3};
  KVArrayHandle a = make_rsp(ids, 2);
  int stype = -1, ndim = 0;
  int64_t dims[2] = {0}, size = 0, n = -1, got[4] = {-1, -1, -1, -1};
  size_t nbytes = 0;
  CHECK_OK(KVArrayGetStorageType(a, &stype));
  CHECK(stype == KV_STYPE_ROW_SPARSE);
  CHECK_OK(KVArrayGetShape(a, dims, 2, &ndim));
  CHECK(ndim == 2 && dims[0] == 5 && dims[1] == 3); /* logical shape */
  CHECK_OK(KVArrayGetSize(a, &size));
  CHECK(size == 15); /* logical element count */
  CHECK_OK(KVArrayGetNBytes(a, &nbytes));
  CHECK(nbytes == 2 * 3 * sizeof(float)); /* the block */
  CHECK_OK(KVArrayGetNumRows(a, &n));
  CHECK(n == 2);
  CHECK_OK(KVArrayGetRowIds(a, got, 4));
  CHECK(got[0] == 1 && got[1] == 3 && got[2] == -1);
  CHECK_ERR(KVArrayGetRowIds(a, got, 1), KV_ERR_INVALID_ARGUMENT, "capacity 1");
  float* data = NULL;
  CHECK_OK(KVArrayGetData(a, (void**)&data));
  CHECK(data[0] == 10 && data[2] == 12 && data[3] == 30 && data[5] == 32);
  float back[6] = {0};
  CHECK_OK(KVArrayCopyToHost(a, back, sizeof back));
  CHECK(back[4] == 31);
  CHECK_ERR(KVArrayCopyToHost(a, back, 15 * sizeof(float)), KV_ERR_INVALID_ARGUMENT, "24 bytes");
  KVArrayFree(a);

  /* no rows at all, and every row */
  CHECK_OK(KVArrayCreateRowSparse(kShape53, 2, KV_FLOAT64, KV_CPU, 0, NULL, 0, &a));
  CHECK_OK(KVArrayGetNumRows(a, &n));
  CHECK_OK(KVArrayGetNBytes(a, &nbytes));
  CHECK(n == 0 && nbytes == 0);
  CHECK_OK(KVArrayGetRowIds(a, NULL, 0));
  CHECK_OK(KVArrayCopyFromHost(a, NULL, 0));
  KVArrayFree(a);
  const int64_t all[5] = {0, 1, 2, 3, 4};
  CHECK_OK(KVArrayCreateRowSparse(kShape53, 2, KV_INT64, KV_CPU, 0, all, 5, &a));
  CHECK_OK(KVArrayGetNBytes(a, &nbytes));
  CHECK(nbytes == 15 * sizeof(int64_t));
  KVArrayFree(a);

  /* rank 1: rows are elements */
  const int64_t len7 = 7, ids1[1] = {6};
  CHECK_OK(KVArrayCreateRowSparse(&len7, 1, KV_FLOAT16, KV_CPU, 0, ids1, 1, &a));
  CHECK_OK(KVArrayGetNBytes(a, &nbytes));
  CHECK(nbytes == 2);
  KVArrayFree(a);

  /* a dense array says so */
  KVArrayHandle d = make_f32(1, 0);
  CHECK_OK(KVArrayGetStorageType(d, &stype));
  CHECK(stype == KV_STYPE_DEFAULT);
  CHECK_ERR(KVArrayGetNumRows(d, &n), KV_ERR_INVALID_ARGUMENT, "not row_sparse");
  CHECK_ERR(KVArrayGetRowIds(d, got, 4), KV_ERR_INVALID_ARGUMENT, "not row_sparse");
  KVArrayFree(d);
}

static void test_create_errors(void) {
  KVArrayHandle a = (KVArrayHandle)0x1;
  const int64_t ids[3] = {0, 2, 4};
  const int64_t unsorted[2] = {3, 1}, dup[2] = {2, 2}, out_of_range[1] = {5}, negative[1] = {-1};
  CHECK_ERR(KVArrayCreateRowSparse(kShape53, 2, KV_FLOAT32, KV_CPU, 0, ids, 3, NULL), KV_ERR_NULL_POINTER, "out");
  CHECK_ERR(KVArrayCreateRowSparse(NULL, 2, KV_FLOAT32, KV_CPU, 0, ids, 3, &a), KV_ERR_NULL_POINTER, "shape");
  CHECK_ERR(KVArrayCreateRowSparse(kShape53, 2, KV_FLOAT32, KV_CPU, 0, NULL, 3, &a), KV_ERR_NULL_POINTER,
            "row_ids");
  CHECK_ERR(KVArrayCreateRowSparse(kShape53, 0, KV_FLOAT32, KV_CPU, 0, ids, 0, &a), KV_ERR_INVALID_ARGUMENT,
            "ndim 0");
  CHECK_ERR(KVArrayCreateRowSparse(kShape53, 2, KV_FLOAT32, KV_CPU, 0, ids, -1, &a), KV_ERR_INVALID_ARGUMENT,
            "num_rows -1");
  CHECK_ERR(KVArrayCreateRowSparse(kShape53, 2, KV_FLOAT32, KV_CPU, 0, ids, 6, &a), KV_ERR_INVALID_ARGUMENT,
            "num_rows 6");
  CHECK_ERR(KVArrayCreateRowSparse(kShape53, 2, KV_FLOAT32, KV_CPU, 0, unsorted, 2, &a), KV_ERR_INVALID_ARGUMENT,
            "strictly increasing");
  CHECK_ERR(KVArrayCreateRowSparse(kShape53, 2, KV_FLOAT32, KV_CPU, 0, dup, 2, &a), KV_ERR_INVALID_ARGUMENT,
            "position 1");
  CHECK_ERR(KVArrayCreateRowSparse(kShape53, 2, KV_FLOAT32, KV_CPU, 0, out_of_range, 1, &a),
            KV_ERR_INVALID_ARGUMENT, "row id 5");
  CHECK_ERR(KVArrayCreateRowSparse(kShape53, 2, KV_FLOAT32, KV_CPU, 0, negative, 1, &a), KV_ERR_INVALID_ARGUMENT,
            "row id -1");
  CHECK_ERR(KVArrayCreateRowSparse(kShape53, 2, 5, KV_CPU, 0, ids, 3, &a), KV_ERR_INVALID_ARGUMENT,
            "unknown dtype 5");
  CHECK_ERR(KVArrayCreateRowSparse(kShape53, 2, KV_FLOAT32, KV_CPU, -1, ids, 3, &a), KV_ERR_DEVICE, "device id");
  int gpus = 0;
  CHECK_OK(KVGetGpuCount(&gpus));
  if (gpus > 0) {
    CHECK_ERR(KVArrayCreateRowSparse(kShape53, 2, KV_FLOAT32, KV_GPU, 0, ids, 3, &a), KV_ERR_NOT_SUPPORTED,
              "host memory");
  }
  CHECK(a == (KVArrayHandle)0x1); /* *out untouched on failure */
  int stype = 0;
  int64_t n = 0;
  CHECK_ERR(KVArrayGetStorageType(NULL, &stype), KV_ERR_NULL_POINTER, "array");
  KVArrayHandle r = make_rsp(ids, 3);
  CHECK_ERR(KVArrayGetStorageType(r, NULL), KV_ERR_NULL_POINTER, "out_stype");
  CHECK_ERR(KVArrayGetNumRows(r, NULL), KV_ERR_NULL_POINTER, "out_num_rows");
  CHECK_ERR(KVArrayGetRowIds(r, NULL, 3), KV_ERR_NULL_POINTER, "out_ids");
  CHECK_ERR(KVArrayGetNumRows(NULL, &n), KV_ERR_NULL_POINTER, "array");
  CHECK_ERR(KVArrayCastStorage(r, 2, &a), KV_ERR_INVALID_ARGUMENT, "unknown storage type 2");
  CHECK_ERR(KVArrayCastStorage(r, KV_STYPE_DEFAULT, NULL), KV_ERR_NULL_POINTER, "out");
  CHECK_ERR(KVArrayCastStorage(NULL, KV_STYPE_DEFAULT, &a), KV_ERR_NULL_POINTER, "src");
  KVArrayHandle scalar = NULL;
  REQUIRE_OK(KVArrayCreate(NULL, 0, KV_FLOAT32, KV_CPU, 0, &scalar));
  CHECK_ERR(KVArrayCastStorage(scalar, KV_STYPE_ROW_SPARSE, &a), KV_ERR_INVALID_ARGUMENT, "scalar");
  CHECK(a == (KVArrayHandle)0x1);
  KVArrayFree(scalar);
  KVArrayFree(r);
}

/* Every function that handles only dense arrays refuses a row_sparse one, naming itself. */
static void test_dense_only_functions_refuse(void) {
  const int64_t ids[2] = {0, 4};
  KVArrayHandle r = make_rsp(ids, 2);
  KVArrayHandle d = NULL;
  REQUIRE_OK(KVArrayCreate(kShape53, 2, KV_FLOAT32, KV_CPU, 0, &d));
  CHECK_ERR(KVArrayCopy(d, r), KV_ERR_NOT_SUPPORTED, "KVArrayCopy: row_sparse");
  CHECK_ERR(KVArrayCopy(r, d), KV_ERR_NOT_SUPPORTED, "KVArrayCopy: row_sparse");
  CHECK_ERR(KVArrayCopy(r, r), KV_ERR_NOT_SUPPORTED, "KVArrayCopy: row_sparse");
  CHECK_ERR(KVArrayFill(r, 1), KV_ERR_NOT_SUPPORTED, "KVArrayFill: row_sparse");
  CHECK_ERR(KVArrayBinary(KV_OP_ADD, r, d, d), KV_ERR_NOT_SUPPORTED, "KVArrayBinary: row_sparse");
  CHECK_ERR(KVArrayBinary(KV_OP_ADD, d, d, r), KV_ERR_NOT_SUPPORTED, "KVArrayBinary: row_sparse");
  CHECK_ERR(KVArrayBinaryScalar(KV_OP_MUL, r, 2, r), KV_ERR_NOT_SUPPORTED, "KVArrayBinaryScalar: row_sparse");
  CHECK_ERR(KVArrayBinaryScalar(KV_OP_MUL, d, 2, r), KV_ERR_NOT_SUPPORTED, "KVArrayBinaryScalar: row_sparse");
  float block[6];
  KVArrayCopyToHost(r, block, sizeof block);
  CHECK(block[0] == 0 && block[3] == 40 && block[5] == 42); /* unchanged by the refusals */
  KVArrayFree(r);
  KVArrayFree(d);
}

static void check_dense_53(KVArrayHandle a, const float* want) {
  float got[15];
  REQUIRE_OK(KVArrayCopyToHost(a, got, sizeof got));
  for (int i = 0; i < 15; ++i) {
    CHECK_MSG(memcmp(&got[i], &want[i], sizeof(float)) == 0, "element %d is %g, want %g", i, got[i], want[i]);
  }
}

static void test_cast_storage(void) {
  const int64_t ids[2] = {1, 3};
  KVArrayHandle r = make_rsp(ids, 2), d = NULL, back = NULL, copy = NULL;
  int stype = -1;
  CHECK_OK(KVArrayCastStorage(r, KV_STYPE_DEFAULT, &d));
  CHECK_OK(KVArrayGetStorageType(d, &stype));
  CHECK(stype == KV_STYPE_DEFAULT);
  const float want[15] = {0, 0, 0, 10, 11, 12, 0, 0, 0, 30, 31, 32, 0, 0, 0};
  check_dense_53(d, want);

  /* dense -> row_sparse keeps the rows with a non-zero element (row 1 only has one) */
  float dense[15] = {0};
  dense[4] = -2;        /* row 1 */
  dense[9] = -0.0f;     /* row 3: -0 is zero */
  dense[14] = NAN;      /* row 4: NaN is non-zero */
  REQUIRE_OK(KVArrayCopyFromHost(d, dense, sizeof dense));
  CHECK_OK(KVArrayCastStorage(d, KV_STYPE_ROW_SPARSE, &back));
  int64_t n = 0, got[5] = {0};
  CHECK_OK(KVArrayGetNumRows(back, &n));
  CHECK(n == 2);
  CHECK_OK(KVArrayGetRowIds(back, got, 5));
  CHECK(got[0] == 1 && got[1] == 4);
  float block[6];
  CHECK_OK(KVArrayCopyToHost(back, block, sizeof block));
  CHECK(block[0] == 0 && block[1] == -2 && block[2] == 0 && isnan(block[5]));

  /* same type: an independent copy */
  CHECK_OK(KVArrayCastStorage(r, KV_STYPE_ROW_SPARSE, &copy));
  float* p = NULL;
  REQUIRE_OK(KVArrayGetData(r, (void**)&p));
  p[0] = 99;
  CHECK_OK(KVArrayCopyToHost(copy, block, sizeof block));
  CHECK(block[0] == 10 && block[5] == 32);
  KVArrayFree(copy);
  CHECK_OK(KVArrayCastStorage(d, KV_STYPE_DEFAULT, &copy));
  check_dense_53(copy, dense);
  KVArrayFree(copy);

  /* every dtype round-trips through both casts */
  for (int k = 0; k < 6; ++k) {
    KVArrayHandle x = NULL, s = NULL, y = NULL;
    REQUIRE_OK(KVArrayCreate(kShape53, 2, kAllDTypes[k], KV_CPU, 0, &x));
    unsigned char bytes[15 * 8] = {0};
    const size_t elem = KVDTypeSize(kAllDTypes[k]);
    bytes[2 * 3 * elem] = 1; /* a non-zero byte in row 2 */
    REQUIRE_OK(KVArrayCopyFromHost(x, bytes, 15 * elem));
    CHECK_OK(KVArrayCastStorage(x, KV_STYPE_ROW_SPARSE, &s));
    CHECK_OK(KVArrayGetNumRows(s, &n));
    CHECK_MSG(n == 1, "%s: %lld rows", KVDTypeName(kAllDTypes[k]), (long long)n);
    CHECK_OK(KVArrayCastStorage(s, KV_STYPE_DEFAULT, &y));
    unsigned char again[15 * 8] = {0};
    REQUIRE_OK(KVArrayCopyToHost(y, again, 15 * elem));
    CHECK_MSG(memcmp(bytes, again, 15 * elem) == 0, "%s round trip", KVDTypeName(kAllDTypes[k]));
    KVArrayFree(x);
    KVArrayFree(s);
    KVArrayFree(y);
  }
  KVArrayFree(r);
  KVArrayFree(d);
  KVArrayFree(back);
}

int main(void) {
  test_create_and_query();
  test_create_errors();
  test_dense_only_functions_refuse();
  test_cast_storage();
  return check_summary();
}
