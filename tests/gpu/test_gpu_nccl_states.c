/* test_gpu_nccl_states.c - the `nccl` store with a built-in optimizer: saved and loaded
 * optimizer states, and float16 keys under multi_precision summed as the `local` store sums.
 *
 *   resume: 3 adam steps (a float32 key and a float16 key with multi_precision=1, one value
 *     per GPU plus one on the CPU), save, a fresh nccl store initialised with the pulled
 *     weights loads the file, 2 more steps: the weights equal 5 uninterrupted steps bit for
 *     bit; the file equals a `local` store's given the same pushes, byte for byte.
 *   mp_sums: test(multi_precision=1) on a float16 key pushed 2048 on the last GPU, 1 on the
 *     others, 1 and 0.5 on the CPU, then 1: the master holds the float32 sums, and the
 *     weight is bit for bit the local store's (a per-GPU or NCCL float16 sum would not be).
 *   errors: save/load without an optimizer (NOT_SUPPORTED naming the nccl store), a corrupt
 *     file and an unknown key (precise errors; the state is unchanged: the next step still
 *     matches the uninterrupted run).
 *
 * Skips (77) without a GPU or without a usable libnccl. Adam's float32 rule and the float16
 * master are exact functions of the summed gradients; the gradients are multiples of 1/8,
 * so NCCL's float32 and float16 sums are exact whatever their order. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../common/arrays.h"

#define STEPS 5
#define SAVE_AT 3

static const int64_t kShape[2] = {37, 5};
static const int kKeys[2] = {3, 4}; /* float32, float16 */
static const int kDTypes[2] = {KV_FLOAT32, KV_FLOAT16};
static const char* kSpec = "adam(learning_rate=0.01,epsilon=1e-3,wd=0.001,multi_precision=1)";

static KVStoreHandle new_store(const char* type) {
  KVStoreHandle s = NULL;
  REQUIRE_OK(KVStoreCreate(type, &s));
  REQUIRE_OK(KVStoreSetOptimizer(s, kSpec));
  return s;
}

static void init_keys(KVStoreHandle s, KVArrayHandle* w) {
  KVArrayHandle vals[2];
  for (int k = 0; k < 2; ++k) vals[k] = w ? w[k] : make_array(kShape, 2, kDTypes[k], KV_CPU, 0, 5 + k);
  REQUIRE_OK(KVStoreInit(s, 2, kKeys, vals));
  if (!w) {
    for (int k = 0; k < 2; ++k) KVArrayFree(vals[k]);
  }
}

/* Step `step`: for each key one gradient per GPU and one on the CPU, in one push. */
static void push_step(KVStoreHandle s, int step, int ngpu) {
  KVArrayHandle vals[2 * 61] = {0};
  int keys[2 * 61] = {0};
  int n = 0;
  for (int k = 0; k < 2; ++k) {
    for (int j = 0; j <= ngpu; ++j) {
      const int on_cpu = j == ngpu;
      vals[n] = make_array(kShape, 2, kDTypes[k], on_cpu ? KV_CPU : KV_GPU, on_cpu ? 0 : j,
                           step * 3 + j + k);
      keys[n++] = kKeys[k];
    }
  }
  REQUIRE_OK(KVStorePush(s, n, keys, vals, 0));
  for (int i = 0; i < n; ++i) KVArrayFree(vals[i]);
}

/* The weights, pulled to the CPU (the caller frees them). */
static void pull_weights(KVStoreHandle s, KVArrayHandle* out) {
  for (int k = 0; k < 2; ++k) REQUIRE_OK(KVArrayCreate(kShape, 2, kDTypes[k], KV_CPU, 0, &out[k]));
  REQUIRE_OK(KVStorePull(s, 2, kKeys, out, 0));
}

static int same_weights(KVStoreHandle a, KVStoreHandle b) {
  KVArrayHandle wa[2], wb[2];
  pull_weights(a, wa);
  pull_weights(b, wb);
  int same = 1;
  for (int k = 0; k < 2; ++k) {
    same &= same_bytes(wa[k], wb[k]);
    KVArrayFree(wa[k]);
    KVArrayFree(wb[k]);
  }
  return same;
}

static char* slurp(const char* path, size_t* n) {
  FILE* f = fopen(path, "rb");
  REQUIRE(f != NULL, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  const long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char* buf = malloc(size > 0 ? (size_t)size : 1);
  *n = fread(buf, 1, (size_t)size, f);
  fclose(f);
  return buf;
}

static void test_resume(int ngpu, const char* dir) {
  char path[512], local_path[512];
  snprintf(path, sizeof path, "%s/nccl.states", dir);
  snprintf(local_path, sizeof local_path, "%s/local.states", dir);
  KVStoreHandle whole = new_store("nccl"), first = new_store("nccl"), local = new_store("local");
  init_keys(whole, NULL);
  init_keys(first, NULL);
  init_keys(local, NULL);
  for (int step = 0; step < SAVE_AT; ++step) {
    push_step(whole, step, ngpu);
    push_step(first, step, ngpu);
    push_step(local, step, ngpu);
  }
  CHECK_MSG(same_weights(first, local), "after %d steps the nccl weights differ from local's", SAVE_AT);
  CHECK_OK(KVStoreSaveOptimizerStates(first, path));
  CHECK_OK(KVStoreSaveOptimizerStates(local, local_path));
  size_t n1 = 0, n2 = 0;
  char* a = slurp(path, &n1);
  char* b = slurp(local_path, &n2);
  CHECK_MSG(n1 == n2 && n1 > 0 && memcmp(a, b, n1) == 0, "the nccl store's file (%zu bytes) differs from local's (%zu)", n1, n2);
  free(a);
  free(b);

  KVArrayHandle w[2];
  pull_weights(first, w);
  KVStoreHandle resumed = new_store("nccl");
  init_keys(resumed, w);
  CHECK_OK(KVStoreLoadOptimizerStates(resumed, path));
  for (int step = SAVE_AT; step < STEPS; ++step) {
    push_step(whole, step, ngpu);
    push_step(resumed, step, ngpu);
  }
  CHECK_MSG(same_weights(whole, resumed), "saved after %d steps and resumed: the weights differ from %d uninterrupted steps",
            SAVE_AT, STEPS);
  for (int k = 0; k < 2; ++k) KVArrayFree(w[k]);
  KVStoreFree(resumed);
  KVStoreFree(whole);
  KVStoreFree(first);
  KVStoreFree(local);
}

/* One push of float16 values: `first` on the last GPU, 1 on every other GPU, 1 and 0.5 on
 * the CPU (first < 0: just 1 on the CPU). */
static void push_halves(KVStoreHandle s, int ngpu, int key, float first) {
  const int64_t shape[1] = {8};
  KVArrayHandle vals[63] = {0};
  int keys[63] = {0};
  int n = 0;
  for (int j = 0; j < ngpu + 2; ++j) { /* the GPUs, then the CPU's 1 and 0.5 */
    if (first < 0 && j != ngpu) continue;
    const int on_cpu = j >= ngpu;
    const float v = j == ngpu - 1 ? first : j == ngpu + 1 ? 0.5f : 1.0f;
    uint16_t host[8];
    for (int i = 0; i < 8; ++i) host[i] = half_from_exact_float(v);
    REQUIRE_OK(KVArrayCreate(shape, 1, KV_FLOAT16, on_cpu ? KV_CPU : KV_GPU, on_cpu ? 0 : j, &vals[n]));
    REQUIRE_OK(KVArrayCopyFromHost(vals[n], host, sizeof host));
    keys[n++] = key;
  }
  REQUIRE_OK(KVStorePush(s, n, keys, vals, 0));
  for (int i = 0; i < n; ++i) KVArrayFree(vals[i]);
}

static void test_mp_sums(int ngpu) {
  const int64_t shape[1] = {8};
  const int key = 9;
  uint16_t zeros[8] = {0}, got[8], want[8];
  KVStoreHandle stores[2];
  REQUIRE_OK(KVStoreCreate("nccl", &stores[0]));
  REQUIRE_OK(KVStoreCreate("local", &stores[1]));
  for (int s = 0; s < 2; ++s) {
    KVArrayHandle w = NULL;
    REQUIRE_OK(KVStoreSetOptimizer(stores[s], "test(multi_precision=1)"));
    REQUIRE_OK(KVArrayCreate(shape, 1, KV_FLOAT16, KV_CPU, 0, &w));
    REQUIRE_OK(KVArrayCopyFromHost(w, zeros, sizeof zeros));
    REQUIRE_OK(KVStoreInit(stores[s], 1, &key, &w));
    push_halves(stores[s], ngpu, key, 2048.0f);
    push_halves(stores[s], ngpu, key, -1.0f);
    REQUIRE_OK(KVStorePull(stores[s], 1, &key, &w, 0));
    REQUIRE_OK(KVArrayCopyToHost(w, s == 0 ? got : want, sizeof got));
    KVArrayFree(w);
    KVStoreFree(stores[s]);
  }
  CHECK_MSG(memcmp(got, want, sizeof got) == 0, "nccl 0x%04x, local 0x%04x", got[0], want[0]);
  /* The float32 master: 2048 + ngpu + 0.5 after the first push (every value exact, no
   * rounding), + 1 after the second; float16 spacing is 2 there, so the weight is the
   * nearest even integer (no ties). With one GPU: 2050.5 -> 2050 (0x6801); a first sum
   * rounded to float16 (2050) would end at 2051 -> 2052 (0x6802). */
  const double master = 2049.5 + ngpu;
  const int nearest = 2 * (int)(master / 2 + 0.5);
  const uint16_t bits = half_from_exact_float((float)nearest);
  CHECK_MSG(got[0] == bits, "%d GPU(s): 0x%04x, want float16(%.1f) = 0x%04x", ngpu, got[0], master, bits);
}

static void test_errors(int ngpu, const char* dir) {
  char path[512], bad[512];
  snprintf(path, sizeof path, "%s/errors.states", dir);
  snprintf(bad, sizeof bad, "%s/corrupt.states", dir);
  KVStoreHandle plain = NULL;
  REQUIRE_OK(KVStoreCreate("nccl", &plain));
  init_keys(plain, NULL);
  CHECK_ERR(KVStoreSaveOptimizerStates(plain, path), KV_ERR_NOT_SUPPORTED, "\"nccl\"");
  CHECK_ERR(KVStoreLoadOptimizerStates(plain, path), KV_ERR_NOT_SUPPORTED, "\"nccl\"");
  KVStoreFree(plain);

  KVStoreHandle whole = new_store("nccl"), s = new_store("nccl");
  init_keys(whole, NULL);
  init_keys(s, NULL);
  push_step(whole, 0, ngpu);
  push_step(s, 0, ngpu);
  CHECK_OK(KVStoreSaveOptimizerStates(s, path));
  size_t n = 0;
  char* bytes = slurp(path, &n);
  bytes[n / 2] ^= 0x40;
  FILE* f = fopen(bad, "wb");
  REQUIRE(f != NULL, "cannot write %s", bad);
  fwrite(bytes, 1, n, f);
  fclose(f);
  free(bytes);
  CHECK_ERR(KVStoreLoadOptimizerStates(s, bad), KV_ERR_INVALID_ARGUMENT, "corrupt.states");
  KVStoreHandle fewer = new_store("nccl");
  KVArrayHandle one = make_array(kShape, 2, KV_FLOAT32, KV_GPU, 0, 1);
  REQUIRE_OK(KVStoreInit(fewer, 1, kKeys, &one));
  CHECK_ERR(KVStoreLoadOptimizerStates(fewer, path), KV_ERR_UNKNOWN_KEY, "key 4");
  KVArrayFree(one);
  KVStoreFree(fewer);
  push_step(whole, 1, ngpu);
  push_step(s, 1, ngpu);
  CHECK_MSG(same_weights(whole, s), "a refused load changed the optimizer state");
  KVStoreFree(whole);
  KVStoreFree(s);
  unlink(path);
  unlink(bad);
}

int main(void) {
  int ngpu = 0;
  SKIP_WITHOUT_GPU(ngpu);
  if (ngpu > 60) ngpu = 60;
  KVStoreHandle probe = NULL;
  const int rc = KVStoreCreate("nccl", &probe);
  if (rc == KV_ERR_NCCL) {
    check_skip("NCCL is not usable here: %s", KVGetLastError());
    return CHECK_SKIP_STATUS;
  }
  CHECK_OK(rc);
  KVStoreFree(probe);
  char dir[] = "/tmp/kvstore_nccl_states_XXXXXX";
  REQUIRE(mkdtemp(dir) != NULL, "mkdtemp failed");
  printf("%d GPU(s)\n", ngpu);
  test_resume(ngpu, dir);
  test_mp_sums(ngpu);
  test_errors(ngpu, dir);
  char path[600];
  snprintf(path, sizeof path, "%s/nccl.states", dir);
  unlink(path);
  snprintf(path, sizeof path, "%s/local.states", dir);
  unlink(path);
  rmdir(dir);
  return check_summary_named("test_gpu_nccl_states");
}
