/* example_util.h - small helpers shared by the C tutorial programs: creating float32 (2,3)
 * arrays, failing loudly, and printing an array the way each tutorial's language does. */
#ifndef KVSTORE_EXAMPLE_UTIL_H_
#define KVSTORE_EXAMPLE_UTIL_H_

#include <kvstore/kvstore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int64_t kShape[2] = {2, 3};

/* Exits with the library's message when a call fails. */
#define TRY(call)                                                               \
  do {                                                                          \
    if ((call) != 0) {                                                          \
      fprintf(stderr, "%s failed: %s\n", #call, KVGetLastError());              \
      exit(1);                                                                  \
    }                                                                           \
  } while (0)

/* ones(shape, ctx) * scale as float32 */
static inline KVArrayHandle ones_ctx(double scale, int dev_type, int dev_id) {
  KVArrayHandle a = NULL;
  TRY(KVArrayCreate(kShape, 2, KV_FLOAT32, dev_type, dev_id, &a));
  TRY(KVArrayFill(a, 1.0));
  TRY(KVArrayBinaryScalar(KV_OP_MUL, a, scale, a));
  return a;
}
static inline KVArrayHandle ones(double scale) { return ones_ctx(scale, KV_CPU, 0); }

/* The tutorials' gpu(i): a GPU when enough of them exist, the CPU otherwise. */
static inline int gpu_or_cpu(int needed) {
  int n = 0;
  TRY(KVGetGpuCount(&n));
  return n >= needed ? KV_GPU : KV_CPU;
}

static inline void read6(KVArrayHandle a, float out[6]) { TRY(KVArrayCopyToHost(a, out, 6 * sizeof(float))); }

/* Shortest decimal that reads back as the same float32 (numpy's repr of float32). */
static inline void shortest(float v, char* buf, size_t size) {
  for (int precision = 1; precision <= 9; ++precision) {
    snprintf(buf, size, "%.*g", precision, (double)v);
    if ((float)strtod(buf, NULL) == v) break;
  }
  if (!strchr(buf, '.') && !strchr(buf, 'e')) strncat(buf, ".", size - strlen(buf) - 1);
}

/* Formats the six elements as numpy does (shortest float32 repr) and returns their widest
 * width. */
static inline size_t numpy_cells(KVArrayHandle a, char cells[6][32]) {
  float v[6];
  size_t width = 0;
  read6(a, v);
  for (int i = 0; i < 6; ++i) {
    shortest(v[i], cells[i], sizeof cells[i]);
    if (strlen(cells[i]) > width) width = strlen(cells[i]);
  }
  return width;
}

/* Prints a 2x3 array as "<open>c c c<row_sep>c c c<close>", each cell right-aligned to
 * `pad` extra columns beyond the widest cell. */
static inline void print_numpy(KVArrayHandle a, const char* open, const char* sep, const char* row_sep,
                               const char* close, int pad) {
  char cells[6][32];
  const int width = (int)numpy_cells(a, cells) + pad;
  printf("%s", open);
  for (int i = 0; i < 6; ++i) printf("%*s%s", width, cells[i], i == 2 ? row_sep : i == 5 ? close : sep);
}

/* numpy repr: array([[-2., -2., -2.],\n       [-2., -2., -2.]]) */
static inline void print_numpy_repr(KVArrayHandle a) { print_numpy(a, "array([[", ", ", "],\n       [", "]])\n", 0); }

/* numpy str: [[-3. -3. -3.]\n [-3. -3. -3.]] */
static inline void print_numpy_str(KVArrayHandle a) { print_numpy(a, "[[", " ", "]\n [", "]]\n", 0); }

/* legacy numpy print (the Python tutorial), with a sign column: [[ 2.  2.  2.]\n [ 2.  2.  2.]] */
static inline void print_numpy_legacy(KVArrayHandle a) { print_numpy(a, "[[", " ", "]\n [", "]]\n", 1); }

/* Scala: Array[Float] = Array(2.0, 2.0, 2.0, 2.0, 2.0, 2.0) */
static inline void print_scala(KVArrayHandle a) {
  float v[6];
  read6(a, v);
  printf("Array[Float] = Array(");
  for (int i = 0; i < 6; ++i) printf("%.1f%s", (double)v[i], i == 5 ? ")\n" : ", ");
}

/* Clojure: [2.0 2.0 2.0 2.0 2.0 2.0] */
static inline void print_clojure(KVArrayHandle a) {
  float v[6];
  read6(a, v);
  printf("[");
  for (int i = 0; i < 6; ++i) printf("%.1f%s", (double)v[i], i == 5 ? "]" : " ");
}

/* PDL: [\n [2 2 2]\n [2 2 2]\n] */
static inline void print_pdl(KVArrayHandle a) {
  float v[6];
  read6(a, v);
  printf("[\n [%g %g %g]\n [%g %g %g]\n]\n", v[0], v[1], v[2], v[3], v[4], v[5]);
}

/* stored += input * factor, as the tutorials' updaters do; prints like `fmt`. */
typedef struct {
  double factor;
  const char* fmt; /* e.g. "update on key: %d\n" */
} ScaledUpdater;

static inline int scaled_update(int key, KVArrayHandle input, KVArrayHandle stored, void* user_data) {
  const ScaledUpdater* u = (const ScaledUpdater*)user_data;
  KVArrayHandle tmp = NULL;
  printf(u->fmt, key);
  int rc = KVArrayCreate(kShape, 2, KV_FLOAT32, KV_CPU, 0, &tmp) ||
           KVArrayBinaryScalar(KV_OP_MUL, input, u->factor, tmp) || KVArrayBinary(KV_OP_ADD, stored, tmp, stored);
  KVArrayFree(tmp);
  return rc;
}

#endif
