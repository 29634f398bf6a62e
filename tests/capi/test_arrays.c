/* test_arrays.c - arrays through the public C ABI: creation, shapes, dtypes, contexts,
 * host copies, fill, element-wise operators, and every error path. */
#include <math.h>
#include <stdint.h>

#include "../common/arrays.h"

static void test_create_and_query(void) {
  KVArrayHandle a = NULL;
  int64_t dims[4] = {2, 3, 4, 5};
  CHECK_OK(KVArrayCreate(dims, 4, KV_FLOAT64, KV_CPU, 7, &a));
  int ndim = 0, dtype = -1, dev_type = 0, dev_id = 0;
  int64_t size = 0, got[4] = {0};
  size_t nbytes = 0;
  CHECK_OK(KVArrayGetNDim(a, &ndim));
  CHECK(ndim == 4);
  CHECK_OK(KVArrayGetShape(a, got, 4, &ndim));
  CHECK(got[0] == 2 && got[1] == 3 && got[2] == 4 && got[3] == 5);
  CHECK_ERR(KVArrayGetShape(a, got, 3, &ndim), KV_ERR_INVALID_ARGUMENT, "capacity 3");
  CHECK(ndim == 4);
  CHECK_OK(KVArrayGetSize(a, &size));
  CHECK(size == 120);
  CHECK_OK(KVArrayGetNBytes(a, &nbytes));
  CHECK(nbytes == 960);
  CHECK_OK(KVArrayGetDType(a, &dtype));
  CHECK(dtype == KV_FLOAT64);
  CHECK_OK(KVArrayGetContext(a, &dev_type, &dev_id));
  CHECK(dev_type == KV_CPU && dev_id == 7);
  double* data = NULL;
  CHECK_OK(KVArrayGetData(a, (void**)&data));
  CHECK(data != NULL && data[0] == 0.0 && data[119] == 0.0); /* zero-filled */
  CHECK_OK(KVArrayFree(a));
  CHECK_OK(KVArrayFree(NULL));

  /* rank 0: one element */
  CHECK_OK(KVArrayCreate(NULL, 0, KV_INT64, KV_CPU, 0, &a));
  CHECK_OK(KVArrayGetSize(a, &size));
  CHECK(size == 1);
  CHECK_OK(KVArrayFill(a, 42));
  int64_t v = 0;
  CHECK_OK(KVArrayCopyToHost(a, &v, sizeof v));
  CHECK(v == 42);
  KVArrayFree(a);

  /* zero-size arrays are valid */
  int64_t empty[2] = {0, 5};
  CHECK_OK(KVArrayCreate(empty, 2, KV_FLOAT32, KV_CPU, 0, &a));
  CHECK_OK(KVArrayGetSize(a, &size));
  CHECK(size == 0);
  CHECK_OK(KVArrayCopyFromHost(a, NULL, 0));
  KVArrayFree(a);

  for (int dt = 0; dt <= 6; ++dt) {
    if (dt == 5) continue;
    CHECK_OK(KVArrayCreate(kShape23, 2, dt, KV_CPU, 0, &a));
    CHECK_OK(KVArrayGetNBytes(a, &nbytes));
    CHECK(nbytes == 6 * KVDTypeSize(dt));
    KVArrayFree(a);
  }
}

static void test_create_errors(void) {
  KVArrayHandle a = (KVArrayHandle)0x1;
  int64_t neg[2] = {2, -1};
  int64_t huge[2] = {INT64_MAX / 2, 4};
  CHECK_ERR(KVArrayCreate(kShape23, 2, KV_FLOAT32, KV_CPU, 0, NULL), KV_ERR_NULL_POINTER, "out");
  CHECK_ERR(KVArrayCreate(NULL, 2, KV_FLOAT32, KV_CPU, 0, &a), KV_ERR_NULL_POINTER, "shape");
  CHECK_ERR(KVArrayCreate(kShape23, -1, KV_FLOAT32, KV_CPU, 0, &a), KV_ERR_INVALID_ARGUMENT, "ndim");
  CHECK_ERR(KVArrayCreate(kShape23, KV_MAX_NDIM + 1, KV_FLOAT32, KV_CPU, 0, &a), KV_ERR_INVALID_ARGUMENT, "ndim");
  CHECK_ERR(KVArrayCreate(neg, 2, KV_FLOAT32, KV_CPU, 0, &a), KV_ERR_INVALID_ARGUMENT, "negative dimension");
  CHECK_ERR(KVArrayCreate(huge, 2, KV_FLOAT32, KV_CPU, 0, &a), KV_ERR_INVALID_ARGUMENT, "too large");
  CHECK_ERR(KVArrayCreate(kShape23, 2, 5, KV_CPU, 0, &a), KV_ERR_INVALID_ARGUMENT, "unknown dtype 5");
  CHECK_ERR(KVArrayCreate(kShape23, 2, KV_FLOAT32, 9, 0, &a), KV_ERR_DEVICE, "unknown device type 9");
  CHECK_ERR(KVArrayCreate(kShape23, 2, KV_FLOAT32, KV_CPU, -1, &a), KV_ERR_DEVICE, "device id -1");
  int gpus = -1;
  CHECK_OK(KVGetGpuCount(&gpus));
  if (gpus == 0) {
    CHECK_ERR(KVArrayCreate(kShape23, 2, KV_FLOAT32, KV_GPU, 0, &a), KV_ERR_DEVICE, "gpu");
  }
  CHECK(a == (KVArrayHandle)0x1); /* *out untouched on failure */
}

static void test_copies(void) {
  KVArrayHandle a = make_f32(0, 0), b = make_f32(5, 1);
  float in[6] = {1, 2, 3, 4, 5, 6}, out[6] = {0};
  CHECK_OK(KVArrayCopyFromHost(a, in, sizeof in));
  CHECK_ERR(KVArrayCopyFromHost(a, in, sizeof in - 4), KV_ERR_INVALID_ARGUMENT, "20 bytes given");
  CHECK_ERR(KVArrayCopyToHost(a, out, sizeof out + 4), KV_ERR_INVALID_ARGUMENT, "28 bytes given");
  CHECK_ERR(KVArrayCopyFromHost(a, NULL, sizeof in), KV_ERR_NULL_POINTER, "data");
  CHECK_ERR(KVArrayCopyFromHost(NULL, in, sizeof in), KV_ERR_NULL_POINTER, "array");
  CHECK_OK(KVArrayCopyToHost(a, out, sizeof out));
  CHECK(memcmp(in, out, sizeof in) == 0);
  CHECK_OK(KVArrayCopy(b, a)); /* cpu(0) -> cpu(1) */
  CHECK_OK(KVArrayCopyToHost(b, out, sizeof out));
  CHECK(out[5] == 6);
  KVArrayHandle c = NULL;
  int64_t s32[2] = {3, 2};
  KVArrayCreate(s32, 2, KV_FLOAT32, KV_CPU, 0, &c);
  CHECK_ERR(KVArrayCopy(c, a), KV_ERR_SHAPE_MISMATCH, "expected (3,2), got (2,3)");
  KVArrayFree(c);
  KVArrayCreate(kShape23, 2, KV_FLOAT64, KV_CPU, 0, &c);
  CHECK_ERR(KVArrayCopy(c, a), KV_ERR_DTYPE_MISMATCH, "expected float64, got float32");
  KVArrayFree(c);
  KVArrayFree(a);
  KVArrayFree(b);
}

static void test_elementwise(void) {
  KVArrayHandle a = make_f32(6, 0), b = make_f32(2, 0), out = make_f32(0, 0);
  CHECK_OK(KVArrayBinary(KV_OP_ADD, a, b, out));
  CHECK(all_f32(out, 8));
  CHECK_OK(KVArrayBinary(KV_OP_SUB, a, b, out));
  CHECK(all_f32(out, 4));
  CHECK_OK(KVArrayBinary(KV_OP_MUL, a, b, out));
  CHECK(all_f32(out, 12));
  CHECK_OK(KVArrayBinary(KV_OP_DIV, a, b, out));
  CHECK(all_f32(out, 3));
  CHECK_OK(KVArrayBinary(KV_OP_ADD, a, b, a)); /* in place */
  CHECK(all_f32(a, 8));
  CHECK_OK(KVArrayBinaryScalar(KV_OP_MUL, a, 0.5, a));
  CHECK(all_f32(a, 4));
  CHECK_OK(KVArrayBinaryScalar(KV_OP_SUB, a, 1, out));
  CHECK(all_f32(out, 3));
  CHECK_OK(KVArrayBinaryScalar(KV_OP_DIV, a, 0, out)); /* float: IEEE inf */
  float inf_buf[6];
  KVArrayCopyToHost(out, inf_buf, sizeof inf_buf);
  CHECK(isinf(inf_buf[0]));
  CHECK_ERR(KVArrayBinary(7, a, b, out), KV_ERR_INVALID_ARGUMENT, "unknown operator 7");
  CHECK_ERR(KVArrayBinary(KV_OP_ADD, a, NULL, out), KV_ERR_NULL_POINTER, "b");

  KVArrayHandle d = NULL, s = NULL, other_dev = make_f32(1, 3);
  int64_t s32[2] = {3, 2};
  KVArrayCreate(kShape23, 2, KV_FLOAT64, KV_CPU, 0, &d);
  KVArrayCreate(s32, 2, KV_FLOAT32, KV_CPU, 0, &s);
  KVArrayFill(out, 77);
  CHECK_ERR(KVArrayBinary(KV_OP_ADD, a, d, out), KV_ERR_DTYPE_MISMATCH, "float64");
  CHECK_ERR(KVArrayBinary(KV_OP_ADD, a, s, out), KV_ERR_SHAPE_MISMATCH, "(3,2)");
  CHECK_ERR(KVArrayBinary(KV_OP_ADD, a, other_dev, out), KV_ERR_DEVICE, "cpu(3)");
  CHECK(all_f32(out, 77));
  KVArrayFree(d);
  KVArrayFree(s);
  KVArrayFree(other_dev);

  /* integers: truncating division, division by zero rejected before anything is written,
   * wrap-around instead of overflow traps */
  KVArrayHandle i1 = NULL, i2 = NULL, io = NULL;
  int64_t n4 = 4;
  KVArrayCreate(&n4, 1, KV_INT32, KV_CPU, 0, &i1);
  KVArrayCreate(&n4, 1, KV_INT32, KV_CPU, 0, &i2);
  KVArrayCreate(&n4, 1, KV_INT32, KV_CPU, 0, &io);
  int32_t x[4] = {7, -7, INT32_MIN, 5}, y[4] = {2, 2, -1, 0}, r[4] = {9, 9, 9, 9};
  KVArrayCopyFromHost(i1, x, sizeof x);
  KVArrayCopyFromHost(i2, y, sizeof y);
  KVArrayCopyFromHost(io, r, sizeof r);
  CHECK_ERR(KVArrayBinary(KV_OP_DIV, i1, i2, io), KV_ERR_INVALID_ARGUMENT, "division by zero");
  KVArrayCopyToHost(io, r, sizeof r);
  CHECK(r[0] == 9 && r[1] == 9 && r[2] == 9 && r[3] == 9);
  y[3] = 3;
  KVArrayCopyFromHost(i2, y, sizeof y);
  CHECK_OK(KVArrayBinary(KV_OP_DIV, i1, i2, io));
  KVArrayCopyToHost(io, r, sizeof r);
  CHECK(r[0] == 3 && r[1] == -3 && r[2] == INT32_MIN && r[3] == 1);
  CHECK_ERR(KVArrayBinaryScalar(KV_OP_DIV, i1, 0.5, io), KV_ERR_INVALID_ARGUMENT, "division by zero");
  CHECK_OK(KVArrayBinaryScalar(KV_OP_ADD, i1, 1, io));
  KVArrayCopyToHost(io, r, sizeof r);
  CHECK(r[0] == 8 && r[2] == INT32_MIN + 1);
  CHECK_ERR(KVArrayFill(i1, 1e12), KV_ERR_INVALID_ARGUMENT, "out of range");
  CHECK_ERR(KVArrayFill(i1, NAN), KV_ERR_INVALID_ARGUMENT, "NaN");
  KVArrayFree(i1);
  KVArrayFree(i2);
  KVArrayFree(io);

  /* float16: arithmetic through float, rounded to nearest even */
  KVArrayHandle h = NULL;
  KVArrayCreate(&n4, 1, KV_FLOAT16, KV_CPU, 0, &h);
  CHECK_OK(KVArrayFill(h, 1.5));
  CHECK_OK(KVArrayBinaryScalar(KV_OP_MUL, h, 3, h));
  uint16_t hb[4];
  KVArrayCopyToHost(h, hb, sizeof hb);
  CHECK(hb[0] == 0x4480); /* 4.5 */
  KVArrayFree(h);

  KVArrayFree(a);
  KVArrayFree(b);
  KVArrayFree(out);
}

static void test_misc(void) {
  CHECK(KVGetVersion() == KVSTORE_VERSION_NUMBER);
  CHECK(strcmp(KVGetVersionString(), "0.1.0") == 0);
  CHECK(strcmp(KVErrorName(KV_ERR_SHAPE_MISMATCH), "KV_ERR_SHAPE_MISMATCH") == 0);
  CHECK(strcmp(KVErrorName(0), "KV_OK") == 0);
  CHECK(strcmp(KVErrorName(-999), "KV_ERR_UNKNOWN") == 0);
  CHECK(KVHasFeature(12345) == 0);
  CHECK(KVDTypeSize(KV_FLOAT16) == 2 && KVDTypeSize(5) == 0);
  CHECK(strcmp(KVDTypeName(KV_FLOAT16), "float16") == 0 && strcmp(KVDTypeName(KV_INT64), "int64") == 0);
  CHECK(KVDTypeName(5) == NULL && KVDTypeName(-1) == NULL && KVDTypeName(1 << 20) == NULL);
  CHECK_ERR(KVGetGpuCount(NULL), KV_ERR_NULL_POINTER, "out_count");
  KVArrayHandle a = make_f32(1, 0);
  CHECK_OK(KVArrayWaitToRead(a));
  KVArrayFree(a);
}

int main(void) {
  test_create_and_query();
  test_create_errors();
  test_copies();
  test_elementwise();
  test_misc();
  return check_summary();
}
