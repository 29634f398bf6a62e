/* test_gpu_arrays.c - GPU arrays through the public ABI, every result compared with the same
 * operation on CPU arrays: copies between host and devices, fill, the four operators with an
 * array or a scalar (in place and not), on every GPU and in all six dtypes, and the error
 * paths (integer division by zero leaves the output untouched, bad contexts). */
#include "../common/arrays.h"

static const char* op_name(int op) {
  static const char* names[4] = {"add", "sub", "mul", "div"};
  return names[op];
}

/* Copy paths: host -> gpu -> host, gpu -> gpu on one device and across devices, cpu <-> gpu
 * through KVArrayCopy. */
static void test_copies(int ngpu) {
  const int64_t shape[2] = {37, 129};
  for (int t = 0; t < 6; ++t) {
    const int dtype = kAllDTypes[t];
    KVArrayHandle ref = make_array(shape, 2, dtype, KV_CPU, 0, 1);
    for (int g = 0; g < ngpu; ++g) {
      KVArrayHandle a = make_array(shape, 2, dtype, KV_GPU, g, 1);
      CHECK(same_bytes(a, ref)); /* host -> device -> host */
      KVArrayHandle b = NULL, c = NULL;
      CHECK_OK(KVArrayCreate(shape, 2, dtype, KV_GPU, g, &b));
      CHECK_OK(KVArrayCopy(b, a)); /* device -> same device */
      CHECK(same_bytes(b, ref));
      CHECK_OK(KVArrayCreate(shape, 2, dtype, KV_CPU, 0, &c));
      CHECK_OK(KVArrayCopy(c, b)); /* device -> cpu array */
      CHECK(same_bytes(c, ref));
      for (int h = 0; h < ngpu; ++h) { /* device -> every other device */
        if (h == g) continue;
        KVArrayHandle d = NULL;
        CHECK_OK(KVArrayCreate(shape, 2, dtype, KV_GPU, h, &d));
        CHECK_OK(KVArrayCopy(d, a));
        CHECK(same_bytes(d, ref));
        KVArrayFree(d);
      }
      KVArrayHandle e = NULL;
      CHECK_OK(KVArrayCreate(shape, 2, dtype, KV_GPU, g, &e));
      CHECK_OK(KVArrayCopy(e, ref)); /* cpu array -> device */
      CHECK(same_bytes(e, ref));
      KVArrayFree(a);
      KVArrayFree(b);
      KVArrayFree(c);
      KVArrayFree(e);
    }
    KVArrayFree(ref);
  }
}

/* A new GPU array is zero-filled, like a CPU one. */
static void test_zero_init(int ngpu) {
  const int64_t shape[1] = {1000};
  for (int g = 0; g < ngpu; ++g) {
    KVArrayHandle a = NULL, z = NULL;
    CHECK_OK(KVArrayCreate(shape, 1, KV_FLOAT64, KV_GPU, g, &a));
    CHECK_OK(KVArrayCreate(shape, 1, KV_FLOAT64, KV_CPU, 0, &z));
    CHECK(same_bytes(a, z));
    KVArrayFree(a);
    KVArrayFree(z);
  }
}

static void test_fill(int ngpu) {
  const int64_t shape[1] = {4099};
  const double values[4] = {0.0, 3.0, -2.75, 200.9};
  for (int t = 0; t < 6; ++t) {
    const int dtype = kAllDTypes[t];
    for (int v = 0; v < 4; ++v) {
      KVArrayHandle cpu = NULL;
      CHECK_OK(KVArrayCreate(shape, 1, dtype, KV_CPU, 0, &cpu));
      const int cpu_rc = KVArrayFill(cpu, values[v]);
      for (int g = 0; g < ngpu; ++g) {
        KVArrayHandle gpu = NULL;
        CHECK_OK(KVArrayCreate(shape, 1, dtype, KV_GPU, g, &gpu));
        CHECK(KVArrayFill(gpu, values[v]) == cpu_rc); /* same acceptance (uint8 of -2.75) */
        CHECK(same_bytes(gpu, cpu));
        KVArrayFree(gpu);
      }
      KVArrayFree(cpu);
    }
  }
  /* Out-of-range values for integer dtypes are rejected and leave the array as it was. */
  for (int g = 0; g < ngpu; ++g) {
    KVArrayHandle a = make_array(shape, 1, KV_UINT8, KV_GPU, g, 2);
    KVArrayHandle ref = make_array(shape, 1, KV_UINT8, KV_CPU, 0, 2);
    CHECK_ERR(KVArrayFill(a, 256.0), KV_ERR_INVALID_ARGUMENT, "out of range");
    CHECK_ERR(KVArrayFill(a, -1.0), KV_ERR_INVALID_ARGUMENT, "out of range");
    CHECK(same_bytes(a, ref));
    KVArrayFree(a);
    KVArrayFree(ref);
  }
}

/* One operator on one dtype and device: GPU against CPU, array and scalar forms, in place. */
static void check_op(int op, int dtype, int g, const int64_t* shape, int ndim) {
  KVArrayHandle ca = make_array(shape, ndim, dtype, KV_CPU, 0, 0);
  KVArrayHandle cb = make_array(shape, ndim, dtype, KV_CPU, 0, 1);
  KVArrayHandle ga = make_array(shape, ndim, dtype, KV_GPU, g, 0);
  KVArrayHandle gb = make_array(shape, ndim, dtype, KV_GPU, g, 1);
  KVArrayHandle cout = NULL, gout = NULL;
  CHECK_OK(KVArrayCreate(shape, ndim, dtype, KV_CPU, 0, &cout));
  CHECK_OK(KVArrayCreate(shape, ndim, dtype, KV_GPU, g, &gout));

  /* out = a op b */
  CHECK_OK(KVArrayBinary(op, ca, cb, cout));
  CHECK_OK(KVArrayBinary(op, ga, gb, gout));
  CHECK_MSG(same_bytes(gout, cout), "mismatch: %s %s on gpu(%d)", op_name(op),
            KVDTypeName(dtype), g);
  /* out = a op scalar, including a fractional scalar (integers truncate it) */
  const double scalars[3] = {3.0, -2.0, 2.5};
  for (int s = 0; s < 3; ++s) {
    const double sc = (dtype == KV_UINT8 && scalars[s] < 0) ? 5.0 : scalars[s];
    CHECK_OK(KVArrayBinaryScalar(op, ca, sc, cout));
    CHECK_OK(KVArrayBinaryScalar(op, ga, sc, gout));
    CHECK_MSG(same_bytes(gout, cout), "mismatch: %s %s scalar %g on gpu(%d)", op_name(op),
              KVDTypeName(dtype), sc, g);
  }
  /* in place: a = a op b, then b = a op b */
  CHECK_OK(KVArrayBinary(op, ca, cb, ca));
  CHECK_OK(KVArrayBinary(op, ga, gb, ga));
  CHECK(same_bytes(ga, ca));
  CHECK_OK(KVArrayBinary(op, ca, cb, cb));
  CHECK_OK(KVArrayBinary(op, ga, gb, gb));
  CHECK(same_bytes(gb, cb));
  CHECK_OK(KVArrayBinaryScalar(op, ca, 3.0, ca));
  CHECK_OK(KVArrayBinaryScalar(op, ga, 3.0, ga));
  CHECK(same_bytes(ga, ca));

  KVArrayFree(ca);
  KVArrayFree(cb);
  KVArrayFree(ga);
  KVArrayFree(gb);
  KVArrayFree(cout);
  KVArrayFree(gout);
}

static void test_ops(int ngpu) {
  const int64_t small[2] = {3, 5};
  const int64_t large[1] = {3 * 1000 * 1000 + 17}; /* many blocks: the grid-stride loop */
  for (int g = 0; g < ngpu; ++g) {
    for (int t = 0; t < 6; ++t) {
      for (int op = KV_OP_ADD; op <= KV_OP_DIV; ++op) {
        check_op(op, kAllDTypes[t], g, small, 2);
        if (g == 0) check_op(op, kAllDTypes[t], g, large, 1);
      }
    }
  }
  /* Rank 0 and empty arrays. */
  KVArrayHandle s = NULL, e = NULL;
  CHECK_OK(KVArrayCreate(NULL, 0, KV_FLOAT32, KV_GPU, 0, &s));
  CHECK_OK(KVArrayFill(s, 4.0));
  CHECK_OK(KVArrayBinaryScalar(KV_OP_MUL, s, 2.5, s));
  float f = 0;
  CHECK_OK(KVArrayCopyToHost(s, &f, sizeof f));
  CHECK(f == 10.0f);
  const int64_t zero[2] = {4, 0};
  CHECK_OK(KVArrayCreate(zero, 2, KV_INT64, KV_GPU, 0, &e));
  CHECK_OK(KVArrayFill(e, 1.0));
  CHECK_OK(KVArrayBinary(KV_OP_DIV, e, e, e));
  KVArrayFree(s);
  KVArrayFree(e);
}

/* Integer division by zero: INVALID_ARGUMENT and `out` unchanged, on every device. */
static void test_div_by_zero(int ngpu) {
  const int64_t shape[1] = {100003};
  const int int_types[3] = {KV_UINT8, KV_INT32, KV_INT64};
  for (int g = 0; g < ngpu; ++g) {
    for (int t = 0; t < 3; ++t) {
      const int dtype = int_types[t];
      KVArrayHandle a = make_array(shape, 1, dtype, KV_GPU, g, 0);
      KVArrayHandle b = make_array(shape, 1, dtype, KV_GPU, g, 1);
      KVArrayHandle out = make_array(shape, 1, dtype, KV_GPU, g, 2);
      KVArrayHandle before = make_array(shape, 1, dtype, KV_CPU, 0, 2);
      KVArrayHandle a_before = make_array(shape, 1, dtype, KV_CPU, 0, 0);
      /* one zero divisor near the end */
      size_t nbytes = 0;
      void* hb = read_back(b, &nbytes);
      put_elem(hb, dtype, shape[0] - 5, 0.0);
      CHECK_OK(KVArrayCopyFromHost(b, hb, nbytes));
      free(hb);
      CHECK_ERR(KVArrayBinary(KV_OP_DIV, a, b, out), KV_ERR_INVALID_ARGUMENT, "division by zero");
      CHECK(same_bytes(out, before));
      CHECK_ERR(KVArrayBinary(KV_OP_DIV, a, b, a), KV_ERR_INVALID_ARGUMENT, "division by zero");
      CHECK(same_bytes(a, a_before));
      CHECK_ERR(KVArrayBinaryScalar(KV_OP_DIV, a, 0.0, out), KV_ERR_INVALID_ARGUMENT,
                "division by zero");
      CHECK_ERR(KVArrayBinaryScalar(KV_OP_DIV, a, 0.5, out), KV_ERR_INVALID_ARGUMENT,
                "division by zero"); /* 0.5 truncates to 0 */
      CHECK(same_bytes(out, before));
      /* the other operators accept a zero element */
      CHECK_OK(KVArrayBinary(KV_OP_MUL, a, b, out));
      KVArrayFree(a);
      KVArrayFree(b);
      KVArrayFree(out);
      KVArrayFree(before);
      KVArrayFree(a_before);
    }
    /* Floating division by zero is IEEE, as on the CPU. */
    const int64_t one[1] = {2};
    KVArrayHandle x = NULL, y = NULL, cx = NULL, cy = NULL;
    CHECK_OK(KVArrayCreate(one, 1, KV_FLOAT32, KV_GPU, g, &x));
    CHECK_OK(KVArrayCreate(one, 1, KV_FLOAT32, KV_GPU, g, &y));
    CHECK_OK(KVArrayCreate(one, 1, KV_FLOAT32, KV_CPU, 0, &cx));
    CHECK_OK(KVArrayCreate(one, 1, KV_FLOAT32, KV_CPU, 0, &cy));
    CHECK_OK(KVArrayFill(x, 1.0));
    CHECK_OK(KVArrayFill(cx, 1.0));
    CHECK_OK(KVArrayBinary(KV_OP_DIV, x, y, x));
    CHECK_OK(KVArrayBinary(KV_OP_DIV, cx, cy, cx));
    CHECK(same_bytes(x, cx));
    KVArrayFree(x);
    KVArrayFree(y);
    KVArrayFree(cx);
    KVArrayFree(cy);
  }
}

static void test_errors(int ngpu) {
  const int64_t shape[1] = {8};
  KVArrayHandle a = NULL;
  CHECK_ERR(KVArrayCreate(shape, 1, KV_FLOAT32, KV_GPU, ngpu, &a), KV_ERR_DEVICE, "does not exist");
  CHECK(a == NULL);
  CHECK_ERR(KVArrayCreate(shape, 1, KV_FLOAT32, KV_GPU, -1, &a), KV_ERR_DEVICE, NULL);
  KVArrayHandle g = make_array(shape, 1, KV_FLOAT32, KV_GPU, 0, 0);
  KVArrayHandle c = make_array(shape, 1, KV_FLOAT32, KV_CPU, 0, 0);
  void* data = NULL;
  CHECK_ERR(KVArrayGetData(g, &data), KV_ERR_DEVICE, NULL); /* not host memory */
  CHECK_ERR(KVArrayBinary(KV_OP_ADD, g, c, g), KV_ERR_DEVICE, NULL);
  CHECK_ERR(KVArrayBinary(7, g, g, g), KV_ERR_INVALID_ARGUMENT, NULL);
  float host[8];
  CHECK_ERR(KVArrayCopyToHost(g, host, sizeof host - 1), KV_ERR_INVALID_ARGUMENT, NULL);
  int dev_type = 0, dev_id = -1;
  CHECK_OK(KVArrayGetContext(g, &dev_type, &dev_id));
  CHECK(dev_type == KV_GPU && dev_id == 0);
  KVArrayFree(g);
  KVArrayFree(c);
}

int main(void) {
  int ngpu = 0;
  SKIP_WITHOUT_GPU(ngpu);
  CHECK(KVHasFeature(KV_FEATURE_CUDA) == 1);
  printf("%d GPU(s)\n", ngpu);
  test_copies(ngpu);
  test_zero_init(ngpu);
  test_fill(ngpu);
  test_ops(ngpu);
  test_div_by_zero(ngpu);
  test_errors(ngpu);
  return check_summary_named("test_gpu_arrays");
}
