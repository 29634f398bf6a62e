/*
 * dist_worker.c - the distributed-store test program, through the public header only.
 *
 * Started by kvstore-launch for every role: a process that is not a worker turns into the
 * scheduler or a server (KVStoreRunServer, with a controller that records commands), so
 * the same binary covers the whole job. Workers run one scenario (argv[1]):
 *
 *   sync R KIND     R rounds of push (ones*(rank+1)) + pull with the `test` optimizer
 *                   (rescale_grad=2) on fp32/fp16/fp64, small and sharded keys; KIND is int or
 *                   str. After round i every worker must read exactly 1 + n(n+1)/2*2*(i+1).
 *                   Odd rounds use pushpull; each round also pulls into two outputs.
 *   async R KIND    the same pushes on a dist_async store; after WaitAll + barrier every worker
 *                   reads the same total 1 + n(n+1)/2*2*R.
 *   assign          sync without an optimizer: a round stores the sum n(n+1)/2.
 *   momentum R KIND sync with sgd(lr=0.5, momentum=0.5), whose state lives on the servers:
 *                   after round i every worker must read exactly w_i, where w_0 = 1,
 *                   m_i = 0.5 m_(i-1) - 0.5 n(n+1)/2 and w_i = w_(i-1) + m_i (all binary
 *                   fractions, exact in fp16 too); a server that did not commit the state
 *                   of its rounds would give w_(i-1) - 0.5 n(n+1)/2 from round 2 on.
 *   async_assign    dist_async without an optimizer: the server assigns each push (the last
 *                   one wins), it does not die; a pushpull returns the value it pushed.
 *   crossed         big keys (3 MiB) pushed and pulled in opposite key orders and priorities by
 *                   odd and even ranks, with many pulls in flight: the pull window and the
 *                   per-key order must neither deadlock nor reorder (sync, assign).
 *   determinism F   random fp32 values (fixed seeds, random delays so arrival order varies),
 *                   no optimizer: the pulled sum must equal the rank-order sum computed
 *                   locally, bit for bit; rank 0 writes the bytes to file F.
 *   api             errors and control calls: unknown key, shape/dtype mismatch, mixed key
 *                   kinds, commands to the servers' controller, barrier, dead-node count,
 *                   rank/size, bad optimizer spec, set_updater refused on a worker (its
 *                   free hook not run: the caller keeps user_data), a push mixing a key
 *                   the optimizer refuses with a good one changes nothing.
 *   killed          worker 2 dies (SIGKILL) in the middle of round 1; the others must fail
 *                   within the timeout with an error naming worker 2 (prints SURVIVOR_OK);
 *                   afterwards every pull right behind the worker's own (refused) push
 *                   fails, and the push's failure is reported by KVStoreWaitAll.
 *   killed_server   server 1 dies (SIGKILL, from its controller) while a command is in
 *                   flight; every worker must get PEER_DEAD naming server 1 for keys it
 *                   owns, while keys of server 0 keep working, also right after a
 *                   failed push to server 1, whose failure the wait reports once
 *                   (prints SURVIVOR_OK); a
 *                   zero-copy push to the dead server does not block writers of its array.
 *   zerocopy R      values of at least 64 KiB travel without copies (pushes read the
 *                   caller's array after the call returned, pulls adopt the received
 *                   buffer): R rounds checking that a write right after a push waits for
 *                   it, that an array freed right after its push is still sent, that an
 *                   output whose data pointer was handed out keeps that pointer and gets
 *                   the value, pushpull into its own value, and a push of a pulled array.
 *   killed_scheduler  the scheduler dies (SIGKILL, when rank 0 raises a flag file) during
 *                   training; every worker must fail within KVSTORE_TIMEOUT_SEC with
 *                   PEER_DEAD naming the scheduler, and KVStoreFree must return at once
 *                   (prints SURVIVOR_OK); the servers' RunServer fails naming it too.
 *   faults          the fault-injection workload (tests/faults/run_faults.py kills one node
 *                   with SIGKILL at a random time): rounds of push + pull of one key per
 *                   server, each pulled value checked against the exact round sum (a pull
 *                   that succeeds without this worker's own push is a STALE line and exit 1);
 *                   the first failure is printed as FAULT_DETECTED with the wall-clock time,
 *                   and 30 more rounds follow it (their successful pulls are checked too),
 *                   then KVStoreFree's result is printed as FREE. Every role writes its pid to
 *                   $KVSTORE_FAULT_DIR/<role>[-<id>].pid; rank 0 creates "training" there
 *                   once the keys are initialised.
 *
 *   rowsparse R     row_sparse values on a (64, 20) float32 key split by rows over the servers
 *                   (the test sets the big-array bound to 1000 elements): R sync rounds in
 *                   which worker w pushes rows {w, 10, 32+i} of w+1 (assign: every other row
 *                   becomes 0), each checked by a dense pull and a row_sparse_pull of ids
 *                   {32+i, 10, 0, 63, 10} (only those rows, sorted); then R rounds of rows
 *                   {20, 40} of 1 under lazy sgd(learning_rate=0.5): only those two rows
 *                   move, by 0.5 * W per round; a row_sparse pushpull is refused.
 *   manykeys K R    K int keys of 4 float32 each (spread over the servers by hash) in ONE
 *                   init call, then R sync rounds of one push call of all K keys (key i,
 *                   worker w: i + w + round) and one pull call of all K keys, every pulled
 *                   element checked (no optimizer: the round's sum); odd rounds use one
 *                   pushpull call instead. Run with a short heartbeat timeout, the job must
 *                   not lose a node to a false death while its nodes are busy with these
 *                   calls (KVStoreFree checks that no node was declared dead).
 *
 * Prints "PASS <scenario> rank R" and exits 0 on success; exits 1 with a message otherwise.
 */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <kvstore/kvstore.h>

#include "../common/check.h"

static int g_rank = -1;

/* ------------------------------------------------------------------------------------ */
/* helpers                                                                               */

static float HalfToFloat(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  int32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0 && mant == 0) {
    x = sign;
  } else {
    x = sign | ((uint32_t)(exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static KVArrayHandle NewArray(int64_t n, int dtype) {
  KVArrayHandle a = NULL;
  REQUIRE_OK(KVArrayCreate(&n, 1, dtype, KV_CPU, 0, &a));
  return a;
}

static KVArrayHandle New2D(int64_t r, int64_t c, int dtype) {
  int64_t shape[2] = {r, c};
  KVArrayHandle a = NULL;
  REQUIRE_OK(KVArrayCreate(shape, 2, dtype, KV_CPU, 0, &a));
  return a;
}

/* Every element of `a` must equal `want`. */
static void ExpectAll(KVArrayHandle a, double want, const char* what, int round) {
  int64_t n = 0;
  int dtype = 0;
  REQUIRE_OK(KVArrayGetSize(a, &n));
  REQUIRE_OK(KVArrayGetDType(a, &dtype));
  size_t nb = 0;
  REQUIRE_OK(KVArrayGetNBytes(a, &nb));
  void* buf = malloc(nb ? nb : 1);
  REQUIRE_OK(KVArrayCopyToHost(a, buf, nb)); /* waits for the pending pull */
  for (int64_t i = 0; i < n; ++i) {
    double v = dtype == KV_FLOAT32   ? ((float*)buf)[i]
               : dtype == KV_FLOAT64 ? ((double*)buf)[i]
                                     : HalfToFloat(((uint16_t*)buf)[i]);
    REQUIRE(v == want, "%s round %d: element %lld is %.17g, expected %.17g", what, round,
          (long long)i, v, want);
  }
  free(buf);
}

static void FillValue(KVArrayHandle a, double v) { REQUIRE_OK(KVArrayFill(a, v)); }

/* Keys of the data scenarios: small and sharded (the test sets the big-array bound to
 * 1000 elements), fp32, fp16 and fp64, one of them 2-D. */
#define NKEYS 6
static const int kIntKeys[NKEYS] = {3, 8, 5, 11, -13, 100003}; /* negative keys are keys too */
static const char* kStrKeys[NKEYS] = {"w.small", "w.big", "h.small", "h.big", "d.small",
                                      "weight/with spaces"};
static const int64_t kSizes[NKEYS] = {10, 2500, 7, 2001, 5, 3 * 700};
static const int kDTypes[NKEYS] = {KV_FLOAT32, KV_FLOAT32, KV_FLOAT16,
                                   KV_FLOAT16, KV_FLOAT64, KV_FLOAT32};

static KVArrayHandle MakeKeyArray(int i) {
  if (i == 5) return New2D(3, 700, kDTypes[i]);
  return NewArray(kSizes[i], kDTypes[i]);
}

static int Init(KVStoreHandle kv, int str, KVArrayHandle* vals) {
  if (str) return KVStoreInitStr(kv, NKEYS, kStrKeys, vals);
  return KVStoreInit(kv, NKEYS, kIntKeys, vals);
}

static int Push(KVStoreHandle kv, int str, KVArrayHandle* vals, int prio) {
  if (str) return KVStorePushStr(kv, NKEYS, kStrKeys, vals, prio);
  return KVStorePush(kv, NKEYS, kIntKeys, vals, prio);
}

static int Pull(KVStoreHandle kv, int str, KVArrayHandle* outs, int prio) {
  if (str) return KVStorePullStr(kv, NKEYS, kStrKeys, outs, prio);
  return KVStorePull(kv, NKEYS, kIntKeys, outs, prio);
}

static int PushPull(KVStoreHandle kv, int str, KVArrayHandle* vals, KVArrayHandle* outs) {
  if (str) return KVStorePushPullStr(kv, NKEYS, kStrKeys, vals, NKEYS, kStrKeys, outs, 0);
  return KVStorePushPull(kv, NKEYS, kIntKeys, vals, NKEYS, kIntKeys, outs, 0);
}

/* ------------------------------------------------------------------------------------ */
/* scenarios                                                                             */

static int Data(KVStoreHandle kv, const char* scenario, int rounds, int str) {
  int n = 0;
  REQUIRE_OK(KVStoreGetGroupSize(kv, &n));
  const int async = strcmp(scenario, "async") == 0;
  const int assign = strcmp(scenario, "assign") == 0;
  const int momentum = strcmp(scenario, "momentum") == 0;
  KVArrayHandle vals[NKEYS], outs[NKEYS], outs2[NKEYS];
  for (int i = 0; i < NKEYS; ++i) {
    vals[i] = MakeKeyArray(i);
    outs[i] = MakeKeyArray(i);
    outs2[i] = MakeKeyArray(i);
    FillValue(vals[i], 1.0);
  }
  if (str) {
    /* The wire names a string key by its text: the empty key is refused at once. */
    const char* empty = "";
    const int rc = KVStoreInitStr(kv, 1, &empty, &vals[0]);
    REQUIRE(rc == KV_ERR_INVALID_ARGUMENT && strstr(KVGetLastError(), "non-empty"),
          "init of the key \"\": %s %s", KVErrorName(rc), KVGetLastError());
  }
  if (momentum) {
    REQUIRE_OK(KVStoreSetOptimizer(kv, "sgd(learning_rate=0.5,momentum=0.5)"));
  } else if (!assign) {
    REQUIRE_OK(KVStoreSetOptimizer(kv, "test(rescale_grad=2)"));
  }
  REQUIRE_OK(Init(kv, str, vals));
  /* Init is done everywhere: every worker reads the initial value. */
  REQUIRE_OK(Pull(kv, str, outs, 0));
  for (int i = 0; i < NKEYS; ++i) ExpectAll(outs[i], 1.0, "init", -1);
  /* Async pushes apply at once: nobody pushes before everyone has read the initial value. */
  REQUIRE_OK(KVStoreBarrier(kv));

  const double per_round = (double)n * (n + 1) / 2.0;
  double sgd_w = 1.0, sgd_m = 0.0;
  for (int r = 0; r < rounds; ++r) {
    for (int i = 0; i < NKEYS; ++i) FillValue(vals[i], g_rank + 1.0);
    sgd_m = 0.5 * sgd_m - 0.5 * per_round;
    sgd_w += sgd_m;
    const double want = momentum ? sgd_w : assign ? per_round : 1.0 + per_round * 2.0 * (r + 1);
    if (async) {
      REQUIRE_OK(Push(kv, str, vals, r));
      continue;
    }
    if (r % 2 == 1) {
      REQUIRE_OK(PushPull(kv, str, vals, outs));
    } else {
      REQUIRE_OK(Push(kv, str, vals, r));
      REQUIRE_OK(Pull(kv, str, outs, -r));
    }
    /* A second pull into other outputs, one of them waited on explicitly. */
    REQUIRE_OK(Pull(kv, str, outs2, 0));
    REQUIRE_OK(KVArrayWaitToRead(outs2[0]));
    for (int i = 0; i < NKEYS; ++i) {
      ExpectAll(outs[i], want, str ? kStrKeys[i] : "int key", r);
      ExpectAll(outs2[i], want, str ? kStrKeys[i] : "int key (2nd pull)", r);
    }
  }
  if (async) {
    REQUIRE_OK(KVStoreWaitAll(kv));
    REQUIRE_OK(KVStoreBarrier(kv));
    REQUIRE_OK(Pull(kv, str, outs, 0));
    for (int i = 0; i < NKEYS; ++i) {
      ExpectAll(outs[i], 1.0 + per_round * 2.0 * rounds, "async total", rounds);
    }
  }
  REQUIRE_OK(KVStoreWaitAll(kv));
  for (int i = 0; i < NKEYS; ++i) {
    KVArrayFree(vals[i]);
    KVArrayFree(outs[i]);
    KVArrayFree(outs2[i]);
  }
  return 0;
}

static int AsyncAssign(KVStoreHandle kv) {
  int n = 0;
  REQUIRE_OK(KVStoreGetGroupSize(kv, &n));
  const int key = 9;
  KVArrayHandle v = NewArray(1500, KV_FLOAT32), o = NewArray(1500, KV_FLOAT32); /* sharded */
  REQUIRE_OK(KVStoreInit(kv, 1, &key, &v));
  FillValue(v, g_rank + 1.0);
  REQUIRE_OK(KVStorePush(kv, 1, &key, &v, 0));
  REQUIRE_OK(KVStoreWaitAll(kv));
  REQUIRE_OK(KVStoreBarrier(kv));
  REQUIRE_OK(KVStorePull(kv, 1, &key, &o, 0));
  float got[1500];
  REQUIRE_OK(KVArrayCopyToHost(o, got, sizeof(got)));
  /* Each part holds some worker's push (parts may come from different workers). */
  for (int i = 0; i < 1500; ++i) {
    REQUIRE(got[i] >= 1 && got[i] <= n && got[i] == (float)(int)got[i], "element %d is %g", i, got[i]);
  }
  REQUIRE_OK(KVStoreBarrier(kv));
  if (g_rank == 0) {
    FillValue(v, 100.0);
    REQUIRE_OK(KVStorePushPull(kv, 1, &key, &v, 1, &key, &o, 0));
    ExpectAll(o, 100.0, "async pushpull without updater", 0);
  }
  REQUIRE_OK(KVStoreBarrier(kv));
  REQUIRE_OK(KVStorePull(kv, 1, &key, &o, 0));
  ExpectAll(o, 100.0, "async value after rank 0's pushpull", 0);
  KVArrayFree(v);
  KVArrayFree(o);
  return 0;
}

static int Crossed(KVStoreHandle kv) {
  int n = 0;
  REQUIRE_OK(KVStoreGetGroupSize(kv, &n));
  enum { K = 8 };
  const int64_t len = 3 << 18; /* 3 MiB of float32 */
  int keys[K];
  KVArrayHandle v[K], o[K], o2[K];
  for (int i = 0; i < K; ++i) {
    keys[i] = 50 + i;
    v[i] = NewArray(len, KV_FLOAT32);
    o[i] = NewArray(len, KV_FLOAT32);
    o2[i] = NewArray(len, KV_FLOAT32);
  }
  REQUIRE_OK(KVStoreInit(kv, K, keys, v));
  for (int r = 0; r < 3; ++r) {
    for (int j = 0; j < K; ++j) {
      const int i = g_rank % 2 == 0 ? j : K - 1 - j;
      FillValue(v[i], (g_rank + 1.0) * (r + 1));
      REQUIRE_OK(KVStorePush(kv, 1, &keys[i], &v[i], g_rank % 2 == 0 ? -j : j));
      REQUIRE_OK(KVStorePull(kv, 1, &keys[i], &o[i], g_rank % 2 == 0 ? j : -j));
    }
    /* Pulls with no push in flight (the windowed kind), several per key. */
    REQUIRE_OK(KVStoreWaitAll(kv));
    for (int j = 0; j < K; ++j) {
      REQUIRE_OK(KVStorePull(kv, 1, &keys[j], &o2[j], 0));
      REQUIRE_OK(KVStorePull(kv, 1, &keys[j], &o2[j], 0));
    }
    const double want = n * (n + 1) / 2.0 * (r + 1);
    for (int i = 0; i < K; ++i) {
      ExpectAll(o[i], want, "crossed pull", r);
      ExpectAll(o2[i], want, "crossed second pull", r);
    }
    REQUIRE_OK(KVStoreBarrier(kv));
  }
  for (int i = 0; i < K; ++i) {
    KVArrayFree(v[i]);
    KVArrayFree(o[i]);
    KVArrayFree(o2[i]);
  }
  return 0;
}

/* xorshift64* - a fixed, portable generator. */
static uint64_t Next(uint64_t* s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 2685821657736338717ull;
}

static void RandomValues(int rank, int round, float* out, int64_t n) {
  uint64_t s = 0x9E3779B97F4A7C15ull ^ ((uint64_t)rank << 32) ^ (uint64_t)(round + 1);
  for (int64_t i = 0; i < n; ++i) {
    /* Mixed magnitudes make float addition order-dependent. */
    const double u = (double)(Next(&s) >> 11) / 9007199254740992.0;
    const int e = (int)(Next(&s) % 20) - 10;
    out[i] = (float)((u - 0.5) * ldexp(1.0, e));
  }
}

static int Determinism(KVStoreHandle kv, const char* path) {
  int n = 0;
  REQUIRE_OK(KVStoreGetGroupSize(kv, &n));
  const int64_t size = 3001; /* sharded over the servers (bound 1000) */
  const int rounds = 3;
  const int key = 42;
  float* host = malloc(sizeof(float) * size);
  float* got = malloc(sizeof(float) * size);
  float* want = malloc(sizeof(float) * size);
  float* tmp = malloc(sizeof(float) * size);
  KVArrayHandle v = NewArray(size, KV_FLOAT32), out = NewArray(size, KV_FLOAT32);
  REQUIRE_OK(KVStoreInit(kv, 1, &key, &v));
  srand((unsigned)time(NULL) ^ (unsigned)getpid());
  for (int r = 0; r < rounds; ++r) {
    RandomValues(g_rank, r, host, size);
    REQUIRE_OK(KVArrayCopyFromHost(v, host, sizeof(float) * size));
    usleep((useconds_t)(rand() % 30000)); /* vary the arrival order */
    REQUIRE_OK(KVStorePush(kv, 1, &key, &v, 0));
    REQUIRE_OK(KVStorePull(kv, 1, &key, &out, 0));
    REQUIRE_OK(KVArrayCopyToHost(out, got, sizeof(float) * size));
    /* The servers sum in rank order: ((v0 + v1) + v2) + ... */
    RandomValues(0, r, want, size);
    for (int w = 1; w < n; ++w) {
      RandomValues(w, r, tmp, size);
      for (int64_t i = 0; i < size; ++i) want[i] += tmp[i];
    }
    REQUIRE(memcmp(got, want, sizeof(float) * size) == 0,
          "round %d: the pulled sum differs from the rank-order sum", r);
    REQUIRE_OK(KVStoreBarrier(kv)); /* nobody starts round r+1 before everyone read round r */
  }
  if (g_rank == 0) {
    FILE* f = fopen(path, "wb");
    REQUIRE(f != NULL, "cannot write %s", path);
    REQUIRE(fwrite(got, sizeof(float), (size_t)size, f) == (size_t)size, "short write");
    fclose(f);
  }
  KVArrayFree(v);
  KVArrayFree(out);
  free(host);
  free(got);
  free(want);
  free(tmp);
  return 0;
}

static int AssignUpdater(int key, KVArrayHandle recv, KVArrayHandle stored, void* user_data) {
  (void)key;
  (void)user_data;
  return KVArrayCopy(stored, recv);
}
static int AssignStrUpdater(const char* key, KVArrayHandle recv, KVArrayHandle stored, void* user_data) {
  (void)key;
  (void)user_data;
  return KVArrayCopy(stored, recv);
}
static void CountFree(void* user_data) { ++*(int*)user_data; }

static int Api(KVStoreHandle kv) {
  int n = 0, rank = -1, rc;
  REQUIRE_OK(KVStoreGetGroupSize(kv, &n));
  REQUIRE_OK(KVStoreGetRank(kv, &rank));
  REQUIRE(rank == g_rank && rank >= 0 && rank < n, "rank %d of %d", rank, n);
  const char* type = NULL;
  REQUIRE_OK(KVStoreGetType(kv, &type));
  REQUIRE(strcmp(type, "dist_sync") == 0, "type %s", type);

  KVArrayHandle a = NewArray(4, KV_FLOAT32), b = NewArray(5, KV_FLOAT32);
  KVArrayHandle h = NewArray(4, KV_FLOAT16);
  const int k = 7, unknown = 99;
  REQUIRE_OK(KVStoreInit(kv, 1, &k, &a));
  rc = KVStoreInit(kv, 1, &k, &a);
  REQUIRE(rc == KV_ERR_DUPLICATE_KEY, "duplicate init: %s", KVErrorName(rc));
  rc = KVStorePull(kv, 1, &unknown, &a, 0);
  REQUIRE(rc == KV_ERR_UNKNOWN_KEY && strstr(KVGetLastError(), "99"), "unknown key: %s %s",
        KVErrorName(rc), KVGetLastError());
  rc = KVStorePush(kv, 1, &k, &b, 0);
  REQUIRE(rc == KV_ERR_SHAPE_MISMATCH && strstr(KVGetLastError(), "(5)") &&
            strstr(KVGetLastError(), "(4)"),
        "shape mismatch: %s %s", KVErrorName(rc), KVGetLastError());
  rc = KVStorePull(kv, 1, &k, &h, 0);
  REQUIRE(rc == KV_ERR_DTYPE_MISMATCH, "dtype mismatch: %s", KVErrorName(rc));
  const char* sk = "s";
  rc = KVStorePushStr(kv, 1, &sk, &a, 0);
  REQUIRE(rc == KV_ERR_KEY_KIND_MISMATCH, "mixed kinds: %s", KVErrorName(rc));
  rc = KVStoreSetOptimizer(kv, "no_such_optimizer(lr=1)");
  REQUIRE(rc == KV_ERR_INVALID_ARGUMENT, "bad optimizer: %s", KVErrorName(rc));
  /* Workers run built-in optimizers (on the servers); unknown capabilities are refused. */
  int capable = -1;
  REQUIRE_OK(KVStoreIsCapable(kv, KV_CAPABILITY_OPTIMIZER, &capable));
  REQUIRE(capable == 1, "is_capable(optimizer) on a worker: %d", capable);
  rc = KVStoreIsCapable(kv, "row_sparse?", &capable);
  REQUIRE(rc == KV_ERR_INVALID_ARGUMENT && capable == 1 && strstr(KVGetLastError(), "\"optimizer\""),
        "unknown capability: %s %s", KVErrorName(rc), KVGetLastError());
  rc = KVStoreSetUpdater(kv, NULL, NULL, NULL);
  REQUIRE(rc == KV_ERR_NOT_SUPPORTED, "set_updater on a worker: %s", KVErrorName(rc));
  /* A refused registration leaves user_data with the caller: its free hook never runs. */
  int frees = 0;
  rc = KVStoreSetUpdater(kv, AssignUpdater, &frees, CountFree);
  REQUIRE(rc == KV_ERR_NOT_SUPPORTED && frees == 0, "refused set_updater: %s, free hook ran %d times",
        KVErrorName(rc), frees);
  rc = KVStoreSetStrUpdater(kv, AssignStrUpdater, &frees, CountFree);
  REQUIRE(rc == KV_ERR_NOT_SUPPORTED && frees == 0, "refused set_str_updater: %s, free hook ran %d times",
        KVErrorName(rc), frees);

  /* Commands reach every server's controller; head 13 makes the controller fail. */
  REQUIRE_OK(KVStoreSendCommandToServers(kv, 5, "hello servers"));
  rc = KVStoreSendCommandToServers(kv, 13, "fail please");
  REQUIRE(rc == KV_ERR_CALLBACK, "failing controller: %s %s", KVErrorName(rc), KVGetLastError());
  rc = KVStoreSendCommandToServers(kv, -1, "reserved");
  REQUIRE(rc == KV_ERR_INVALID_ARGUMENT, "reserved head: %s", KVErrorName(rc));

  /* A second dist store in the same process is refused at once (the job is full). */
  KVStoreHandle kv2 = NULL;
  rc = KVStoreCreate("dist_sync", &kv2);
  REQUIRE(rc == KV_ERR_INVALID_ARGUMENT && kv2 == NULL && strstr(KVGetLastError(), "already running"),
        "second store: %s %s", KVErrorName(rc), KVGetLastError());

  int dead = -1;
  REQUIRE_OK(KVStoreGetNumDeadNode(kv, KV_NODE_SCHEDULER + KV_NODE_SERVERS + KV_NODE_WORKERS, 60, &dead));
  REQUIRE(dead == 0, "%d dead nodes in a healthy job", dead);
  rc = KVStoreGetNumDeadNode(kv, 0, 60, &dead);
  REQUIRE(rc == KV_ERR_INVALID_ARGUMENT, "group 0: %s", KVErrorName(rc));

  /* Broadcast = init (rank 0's value) + pull on every worker; a second broadcast of the
   * key is a duplicate init. */
  const int bk = 21;
  KVArrayHandle bv = NewArray(6, KV_FLOAT64), bo = NewArray(6, KV_FLOAT64);
  FillValue(bv, 10.0 + rank); /* only rank 0's value may win */
  REQUIRE_OK(KVStoreBroadcast(kv, 1, &bk, &bv, 1, &bk, &bo, 0));
  ExpectAll(bo, 10.0, "broadcast", 0);
  rc = KVStoreBroadcast(kv, 1, &bk, &bv, 1, &bk, &bo, 0);
  REQUIRE(rc == KV_ERR_DUPLICATE_KEY, "second broadcast: %s", KVErrorName(rc));
  KVArrayFree(bv);
  KVArrayFree(bo);

  /* The store still works after all those errors. */
  FillValue(a, 2.0);
  REQUIRE_OK(KVStorePush(kv, 1, &k, &a, 0));
  REQUIRE_OK(KVStorePull(kv, 1, &k, &a, 0));
  ExpectAll(a, 2.0 * n, "after errors", 0);
  for (int i = 0; i < 3; ++i) REQUIRE_OK(KVStoreBarrier(kv));

  /* A push call with a key the optimizer refuses (int32 under sgd) fails before any key of
   * it is applied: the float key's value and momentum move only with the next good push. */
  REQUIRE_OK(KVStoreSetOptimizer(kv, "sgd(learning_rate=1,momentum=0.5)"));
  /* Optimizer states: worker 0 gathers the servers' state into one file and sends it back
   * (tests/inprocess/test_dist_states.cc checks the values); a missing file is refused. */
  int states_rank = -1;
  REQUIRE_OK(KVStoreGetRank(kv, &states_rank));
  if (states_rank == 0) {
    char states_path[96];
    snprintf(states_path, sizeof states_path, "/tmp/kv_dist_api_%d.kvos", (int)getpid());
    REQUIRE_OK(KVStoreSaveOptimizerStates(kv, states_path));
    REQUIRE_OK(KVStoreLoadOptimizerStates(kv, states_path));
    remove(states_path);
    rc = KVStoreLoadOptimizerStates(kv, "/nonexistent/states.kvos");
    REQUIRE(rc == KV_ERR_INVALID_ARGUMENT && strstr(KVGetLastError(), "cannot open"),
            "load_optimizer_states of a missing file: %s %s", KVErrorName(rc), KVGetLastError());
  }
  REQUIRE_OK(KVStoreBarrier(kv));
  const int mk[2] = {31, 32};
  KVArrayHandle mv[2] = {NewArray(4, KV_FLOAT32), NewArray(4, KV_INT32)};
  REQUIRE_OK(KVStoreInit(kv, 2, mk, mv));
  FillValue(mv[0], 1.0);
  FillValue(mv[1], 1.0);
  rc = KVStorePush(kv, 2, mk, mv, 0);
  REQUIRE(rc == KV_ERR_NOT_SUPPORTED && strstr(KVGetLastError(), "key 32"),
        "push of an int32 key under sgd: %s %s", KVErrorName(rc), KVGetLastError());
  REQUIRE_OK(KVStoreWaitAll(kv));
  REQUIRE_OK(KVStorePush(kv, 1, &mk[0], &mv[0], 0));
  REQUIRE_OK(KVStorePull(kv, 1, &mk[0], &mv[0], 0));
  /* One applied round: mom = -lr * n, w = 0 + mom (two rounds would give -2.5 n). */
  ExpectAll(mv[0], -1.0 * n, "sgd after a refused push", 0);
  KVArrayFree(mv[0]);
  KVArrayFree(mv[1]);
  REQUIRE_OK(KVStoreSetBarrierBeforeExit(kv, 1));
  KVArrayFree(a);
  KVArrayFree(b);
  KVArrayFree(h);
  return 0;
}

static double Now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Makes values v and outputs o of 16 floats for two keys, inits the keys and completes
 * round 0 on every worker (the start of the killed-node scenarios). */
static void StartTwoKeys(KVStoreHandle kv, const int keys[2], KVArrayHandle v[2], KVArrayHandle o[2]) {
  for (int i = 0; i < 2; ++i) {
    v[i] = NewArray(16, KV_FLOAT32);
    o[i] = NewArray(16, KV_FLOAT32);
  }
  REQUIRE_OK(KVStoreInit(kv, 2, keys, v));
  REQUIRE_OK(KVStorePush(kv, 2, keys, v, 0));
  REQUIRE_OK(KVStorePull(kv, 2, keys, o, 0));
  REQUIRE_OK(KVStoreWaitAll(kv));
  REQUIRE_OK(KVStoreBarrier(kv));
}

static int Killed(KVStoreHandle kv) {
  const int keys[2] = {1, 2};
  KVArrayHandle v[2], o[2];
  StartTwoKeys(kv, keys, v, o);
  if (g_rank == 2) {
    /* Mid-round: push key 1 only, make sure it left, then die without any goodbye. */
    REQUIRE_OK(KVStorePush(kv, 1, &keys[0], &v[0], 0));
    usleep(300000);
    kill(getpid(), SIGKILL);
  }
  const double t0 = Now();
  REQUIRE_OK(KVStorePush(kv, 2, keys, v, 0));
  int rc = KVStorePull(kv, 2, keys, o, 0);
  if (rc == 0) rc = KVArrayWaitToRead(o[1]);
  if (rc == 0) rc = KVArrayWaitToRead(o[0]);
  if (rc == 0) rc = KVStoreWaitAll(kv);
  const double took = Now() - t0;
  REQUIRE(rc == KV_ERR_PEER_DEAD || rc == KV_ERR_TIMEOUT, "expected PEER_DEAD/TIMEOUT, got %s: %s",
        KVErrorName(rc), KVGetLastError());
  REQUIRE(strstr(KVGetLastError(), "worker 2") || strstr(KVGetLastError(), "worker(s) 2"),
        "the error does not name worker 2: %s", KVGetLastError());
  REQUIRE(took < 20.0, "took %.1f s to notice", took);
  const int first_rc = rc;
  char first_msg[512];
  snprintf(first_msg, sizeof first_msg, "%s", KVGetLastError());
  /* Worker 2 is known dead now: the server refuses these pushes on arrival. A pull of the
   * key right behind its own refused push must fail too, never return the stored value
   * without the push; the push's own failure is reported by the wait. */
  for (int r = 0; r < 3; ++r) {
    FillValue(v[0], 100.0 + r);
    rc = KVStorePush(kv, 1, &keys[0], &v[0], 0);
    int pull_rc = KVStorePull(kv, 1, &keys[0], &o[0], 0);
    if (pull_rc == 0) pull_rc = KVArrayWaitToRead(o[0]);
    REQUIRE(pull_rc != 0, "round %d: a pull succeeded without this worker's own push (push: %s)", r,
          KVErrorName(rc));
    REQUIRE(strstr(KVGetLastError(), "worker 2") && strstr(KVGetLastError(), "key 1"),
          "the failed pull does not name key 1 and worker 2: %s", KVGetLastError());
    const int wait_rc = KVStoreWaitAll(kv);
    REQUIRE(rc != 0 || wait_rc != 0, "round %d: a refused push was reported neither by push nor by wait", r);
    if (rc == 0) {
      REQUIRE(strstr(KVGetLastError(), "push of key 1") && strstr(KVGetLastError(), "worker 2"),
            "the wait does not name the failed push of key 1 and worker 2: %s", KVGetLastError());
    }
  }
  printf("SURVIVOR_OK rank %d after %.2f s: %s: %s\n", g_rank, took, KVErrorName(first_rc),
         first_msg);
  fflush(stdout);
  /* The exit barrier fails fast too (worker 2 is gone); KVStoreFree must not hang. */
  KVArrayFree(v[0]);
  KVArrayFree(v[1]);
  KVArrayFree(o[0]);
  KVArrayFree(o[1]);
  return 0;
}

static int KilledServer(KVStoreHandle kv) {
  int n = 0;
  REQUIRE_OK(KVStoreGetGroupSize(kv, &n));
  /* With 2 servers, small int key k lives on server k % 2. */
  const int keys[2] = {4, 5};
  KVArrayHandle v[2], o[2];
  StartTwoKeys(kv, keys, v, o);
  /* Key 7 (odd: server 1), 80 KiB: pushed without a copy. */
  const int big_key = 7;
  KVArrayHandle big = NewArray(20000, KV_FLOAT32);
  REQUIRE_OK(KVStoreInit(kv, 1, &big_key, &big));
  const double t0 = Now();
  if (g_rank == 0) {
    /* Command 99 makes server 1 kill itself before it answers. */
    int rc = KVStoreSendCommandToServers(kv, 99, "die");
    REQUIRE(rc == KV_ERR_PEER_DEAD || rc == KV_ERR_TIMEOUT, "command to a dying server: %s %s",
          KVErrorName(rc), KVGetLastError());
    REQUIRE(strstr(KVGetLastError(), "server 1") != NULL, "error does not name server 1: %s",
          KVGetLastError());
  }
  REQUIRE_OK(KVStoreBarrier(kv));
  /* Key 5 (server 1) fails at once; key 4 (server 0) still completes rounds. */
  FillValue(v[0], g_rank + 1.0);
  REQUIRE_OK(KVStorePush(kv, 1, &keys[0], &v[0], 0));
  REQUIRE_OK(KVStorePull(kv, 1, &keys[0], &o[0], 0));
  ExpectAll(o[0], n * (n + 1) / 2.0, "server 0 key after server 1 died", 1);
  int dead = -1;
  REQUIRE_OK(KVStoreGetNumDeadNode(kv, KV_NODE_SERVERS, 60, &dead));
  REQUIRE(dead == 1, "%d dead servers reported, expected 1", dead);
  REQUIRE_OK(KVStoreGetNumDeadNode(kv, KV_NODE_WORKERS + KV_NODE_SCHEDULER, 60, &dead));
  REQUIRE(dead == 0, "%d dead workers/scheduler reported, expected 0", dead);
  int rc = KVStorePull(kv, 1, &keys[1], &o[1], 0);
  if (rc == 0) rc = KVArrayWaitToRead(o[1]);
  REQUIRE(rc == KV_ERR_PEER_DEAD, "pull from a dead server: %s %s", KVErrorName(rc), KVGetLastError());
  REQUIRE(strstr(KVGetLastError(), "server 1") != NULL, "error does not name server 1: %s",
        KVGetLastError());
  /* A failed push of a key on the dead server is reported by the wait, naming the push,
   * the key and the server; it does not make calls on keys of the healthy server fail. */
  FillValue(v[1], 1.0);
  rc = KVStorePush(kv, 1, &keys[1], &v[1], 0);
  if (rc == 0) {
    for (int r = 0; r < 3; ++r) {
      FillValue(v[0], g_rank + 1.0);
      REQUIRE_OK(KVStorePush(kv, 1, &keys[0], &v[0], 0));
      REQUIRE_OK(KVStorePull(kv, 1, &keys[0], &o[0], 0));
      ExpectAll(o[0], n * (n + 1) / 2.0, "server 0 key after a failed push to server 1", r);
    }
    rc = KVStoreWaitAll(kv);
  }
  REQUIRE(rc == KV_ERR_PEER_DEAD && strstr(KVGetLastError(), "push of key 5") &&
            strstr(KVGetLastError(), "server 1"),
        "failed push to a dead server: %s %s", KVErrorName(rc), KVGetLastError());
  REQUIRE_OK(KVStoreWaitAll(kv)); /* reported once */
  /* A zero-copy push (>= 64 KiB) of a key that lives on the dead server: writing or
   * freeing its value must not wait for the network. */
  const double t1 = Now();
  rc = KVStorePush(kv, 1, &big_key, &big, 0);
  if (rc == 0) {
    FillValue(big, 7.0);
    REQUIRE_OK(KVArrayFree(big));
    rc = KVStoreWaitAll(kv);
  } else {
    KVArrayFree(big);
  }
  REQUIRE(rc == KV_ERR_PEER_DEAD, "push to a dead server: %s %s", KVErrorName(rc), KVGetLastError());
  REQUIRE(Now() - t1 < 5.0, "a zero-copy push to a dead server held its array for %.1f s", Now() - t1);
  printf("SURVIVOR_OK rank %d after %.2f s: %s: %s\n", g_rank, Now() - t0, KVErrorName(rc),
         KVGetLastError());
  fflush(stdout);
  KVArrayFree(v[0]);
  KVArrayFree(v[1]);
  KVArrayFree(o[0]);
  KVArrayFree(o[1]);
  return 0;
}

/* Every dtype at sizes 0, 1, odd ones on both sides of the big-array bound (1000 in the
 * tests: sharded across the servers) and of the shared-memory threshold (1 KiB), and one
 * of about 1 MiB: sync rounds of no-updater pushes (the servers sum them) and pulls, one
 * round by push + pull, one by pushpull, with a different value for every element, so that
 * a payload put at the wrong place or cut short shows. Run with and without KVSTORE_SHM. */
static void SetPattern(KVArrayHandle a, int dtype, int64_t len, int r, int n, int sum) {
  const size_t es = dtype == KV_FLOAT64 || dtype == KV_INT64 ? 8 : dtype == KV_FLOAT16 ? 2 : dtype == KV_UINT8 ? 1 : 4;
  unsigned char* buf = malloc(len * es + 1);
  for (int64_t i = 0; i < len; ++i) {
    /* one worker's value, or (sum) the sum over the n workers */
    const int base = (int)(i % 7) + 3 * (r + 1);
    const double v = sum ? (double)n * base + n * (n + 1) / 2.0 : (double)base + g_rank + 1;
    unsigned char* p = buf + i * es;
    if (dtype == KV_FLOAT32) { float f = (float)v; memcpy(p, &f, 4); }
    else if (dtype == KV_FLOAT64) { memcpy(p, &v, 8); }
    else if (dtype == KV_UINT8) { *p = (unsigned char)v; }
    else if (dtype == KV_INT32) { int32_t x = (int32_t)v; memcpy(p, &x, 4); }
    else if (dtype == KV_INT64) { int64_t x = (int64_t)v; memcpy(p, &x, 8); }
    else { /* float16: small integers are exact */
      float f = (float)v;
      uint32_t b;
      memcpy(&b, &f, 4);
      const uint16_t h = (uint16_t)(((b >> 16) & 0x8000u) | ((((b >> 23) & 0xff) - 127 + 15) << 10) | ((b >> 13) & 0x3ff));
      memcpy(p, &h, 2);
    }
  }
  REQUIRE_OK(KVArrayCopyFromHost(a, buf, len * es));
  free(buf);
}

static int Values(KVStoreHandle kv) {
  int n = 0;
  REQUIRE_OK(KVStoreGetGroupSize(kv, &n));
  static const int dtypes[6] = {KV_FLOAT32, KV_FLOAT64, KV_FLOAT16, KV_UINT8, KV_INT32, KV_INT64};
  static const int64_t sizes[8] = {0, 1, 3, 255, 1023, 1025, 4099, 262147};
  enum { NV = 6 * 8 };
  int keys[NV];
  KVArrayHandle v[NV], o[NV], want[NV];
  for (int d = 0; d < 6; ++d) {
    for (int z = 0; z < 8; ++z) {
      const int k = d * 8 + z;
      keys[k] = 500 + k;
      v[k] = NewArray(sizes[z], dtypes[d]);
      o[k] = NewArray(sizes[z], dtypes[d]);
      want[k] = NewArray(sizes[z], dtypes[d]);
      SetPattern(v[k], dtypes[d], sizes[z], -1, n, 0);
    }
  }
  REQUIRE_OK(KVStoreInit(kv, NV, keys, v));
  REQUIRE_OK(KVStoreBarrier(kv));
  for (int r = 0; r < 2; ++r) {
    for (int k = 0; k < NV; ++k) {
      SetPattern(v[k], dtypes[k / 8], sizes[k % 8], r, n, 0);
      SetPattern(want[k], dtypes[k / 8], sizes[k % 8], r, n, 1);
    }
    if (r == 0) {
      REQUIRE_OK(KVStorePush(kv, NV, keys, v, 0));
      REQUIRE_OK(KVStorePull(kv, NV, keys, o, 0));
    } else {
      REQUIRE_OK(KVStorePushPull(kv, NV, keys, v, NV, keys, o, 0));
    }
    for (int k = 0; k < NV; ++k) {
      size_t nb = 0;
      REQUIRE_OK(KVArrayGetNBytes(o[k], &nb));
      unsigned char* got = malloc(nb + 1);
      unsigned char* exp = malloc(nb + 1);
      REQUIRE_OK(KVArrayCopyToHost(o[k], got, nb));
      REQUIRE_OK(KVArrayCopyToHost(want[k], exp, nb));
      REQUIRE(memcmp(got, exp, nb) == 0, "round %d: key %d (dtype %d, %lld elements) differs from the sum",
              r, keys[k], dtypes[k / 8], (long long)sizes[k % 8]);
      free(got);
      free(exp);
    }
  }
  for (int k = 0; k < NV; ++k) {
    KVArrayFree(v[k]);
    KVArrayFree(o[k]);
    KVArrayFree(want[k]);
  }
  return 0;
}

static int ZeroCopy(KVStoreHandle kv, int rounds) {
  int n = 0;
  REQUIRE_OK(KVStoreGetGroupSize(kv, &n));
  const int64_t len = 1 << 16; /* 256 KiB of float32: above the zero-copy bound */
  const int keys[2] = {21, 22};
  KVArrayHandle v = NewArray(len, KV_FLOAT32), o = NewArray(len, KV_FLOAT32);
  KVArrayHandle exposed = NewArray(len, KV_FLOAT32);
  KVArrayHandle init[2] = {v, o};
  REQUIRE_OK(KVStoreInit(kv, 2, keys, init));
  float* pinned = NULL;
  REQUIRE_OK(KVArrayGetData(exposed, (void**)&pinned));
  for (int r = 0; r < rounds; ++r) {
    const double sum = n * (n + 1) / 2.0 * (r + 1);
    /* A write right after the push waits until the push has read the value. */
    FillValue(v, (g_rank + 1.0) * (r + 1));
    REQUIRE_OK(KVStorePush(kv, 1, &keys[0], &v, 0));
    FillValue(v, -1000.0);
    REQUIRE_OK(KVStorePull(kv, 1, &keys[0], &o, 0));
    ExpectAll(o, sum, "pull after a push whose value was overwritten", r);
    /* An array freed right after its push: the push still sends its value. */
    KVArrayHandle tmp = NewArray(len, KV_FLOAT32);
    FillValue(tmp, (g_rank + 1.0) * (r + 1));
    REQUIRE_OK(KVStorePush(kv, 1, &keys[1], &tmp, 0));
    REQUIRE_OK(KVArrayFree(tmp));
    /* An output whose data pointer was handed out keeps it and receives the value. */
    REQUIRE_OK(KVStorePull(kv, 1, &keys[1], &exposed, 0));
    REQUIRE_OK(KVArrayWaitToRead(exposed));
    float* again = NULL;
    REQUIRE_OK(KVArrayGetData(exposed, (void**)&again));
    REQUIRE(again == pinned, "the data pointer of an exposed output moved (%p -> %p)", (void*)pinned,
          (void*)again);
    for (int64_t i = 0; i < len; ++i) {
      REQUIRE(pinned[i] == sum, "round %d: exposed output element %lld is %g, expected %g", r,
            (long long)i, pinned[i], sum);
    }
    /* Pushpull into its own value, then a push of an array that received a pull. */
    FillValue(v, (g_rank + 1.0) * (r + 1));
    REQUIRE_OK(KVStorePushPull(kv, 1, &keys[0], &v, 1, &keys[0], &v, 0));
    ExpectAll(v, sum, "pushpull into its own value", r);
    REQUIRE_OK(KVStorePull(kv, 1, &keys[1], &o, 0));
    ExpectAll(o, sum, "pull into an output", r);
    FillValue(o, (g_rank + 1.0) * (r + 1)); /* writes the adopted buffer in place */
    REQUIRE_OK(KVStorePush(kv, 1, &keys[1], &o, 0));
    REQUIRE_OK(KVStorePull(kv, 1, &keys[1], &o, 0));
    ExpectAll(o, sum, "push of a pulled array", r);
    REQUIRE_OK(KVStoreBarrier(kv));
  }
  KVArrayFree(v);
  KVArrayFree(o);
  KVArrayFree(exposed);
  return 0;
}

/* The flag file that makes the scheduler of this job kill itself (killed_scheduler). */
static void SchedulerFlag(char* path, size_t n) {
  const char* port = getenv("DMLC_PS_ROOT_PORT");
  snprintf(path, n, "/tmp/kvstore-test-kill-scheduler-%s", port ? port : "0");
}

static void* SchedulerSuicideWatch(void* arg) {
  (void)arg;
  char path[128];
  SchedulerFlag(path, sizeof path);
  for (;;) {
    if (access(path, F_OK) == 0) {
      unlink(path);
      kill(getpid(), SIGKILL);
    }
    usleep(10000);
  }
  return NULL;
}

static int KilledScheduler(KVStoreHandle kv) {
  const int keys[2] = {4, 5}; /* one key per server */
  KVArrayHandle v[2], o[2];
  StartTwoKeys(kv, keys, v, o);
  if (g_rank == 0) {
    char path[128];
    SchedulerFlag(path, sizeof path);
    FILE* f = fopen(path, "w");
    REQUIRE(f != NULL, "cannot create %s", path);
    fclose(f);
  }
  const double t0 = Now();
  const char* limit_env = getenv("KVSTORE_TIMEOUT_SEC");
  const double limit = limit_env ? atof(limit_env) : 30.0;
  int rc = 0;
  while (rc == 0 && Now() - t0 < 3 * limit) {
    rc = KVStorePush(kv, 2, keys, v, 0);
    if (rc == 0) rc = KVStorePull(kv, 2, keys, o, 0);
    if (rc == 0) rc = KVArrayWaitToRead(o[0]);
    if (rc == 0) rc = KVArrayWaitToRead(o[1]);
    if (rc == 0) rc = KVStoreWaitAll(kv);
  }
  const double took = Now() - t0;
  REQUIRE(rc == KV_ERR_PEER_DEAD && strstr(KVGetLastError(), "scheduler"),
        "expected PEER_DEAD naming the scheduler, got %s: %s", KVErrorName(rc), KVGetLastError());
  REQUIRE(took < limit, "took %.1f s to fail after the scheduler died (timeout %.0f s)", took, limit);
  printf("SURVIVOR_OK rank %d after %.2f s: %s: %s\n", g_rank, took, KVErrorName(rc), KVGetLastError());
  fflush(stdout);
  const double t1 = Now();
  rc = KVStoreFree(kv);
  REQUIRE(rc == KV_ERR_PEER_DEAD && strstr(KVGetLastError(), "scheduler"),
        "KVStoreFree without a scheduler: %s: %s", KVErrorName(rc), KVGetLastError());
  REQUIRE(Now() - t1 < 5.0, "KVStoreFree took %.1f s without a scheduler", Now() - t1);
  KVArrayFree(v[0]);
  KVArrayFree(v[1]);
  KVArrayFree(o[0]);
  KVArrayFree(o[1]);
  return 0;
}

static double WallClock(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* $KVSTORE_FAULT_DIR/<name>, or "" when the variable is unset. */
static void FaultPath(char* path, size_t n, const char* name) {
  const char* dir = getenv("KVSTORE_FAULT_DIR");
  snprintf(path, n, "%s/%s", dir ? dir : "", name);
  if (!dir) path[0] = 0;
}

static void WritePidFile(void) {
  const char* role = getenv("DMLC_ROLE");
  const char* id = role && strcmp(role, "server") == 0 ? getenv("DMLC_SERVER_ID") : getenv("DMLC_WORKER_ID");
  char name[64], path[512];
  if (role && strcmp(role, "scheduler") == 0) snprintf(name, sizeof name, "scheduler.pid");
  else snprintf(name, sizeof name, "%s-%s.pid", role ? role : "worker", id ? id : "0");
  FaultPath(path, sizeof path, name);
  if (!path[0]) return;
  FILE* f = fopen(path, "w");
  if (f) {
    fprintf(f, "%d\n", (int)getpid());
    fclose(f);
  }
}

static int Faults(KVStoreHandle kv) {
  int n = 0;
  REQUIRE_OK(KVStoreGetGroupSize(kv, &n));
  /* KVSTORE_TEST_FAULT_LEN: elements per key (64; larger values travel through shared
   * memory between co-located peers, tests/dist/run_shm_test.py). */
  const char* len_env = getenv("KVSTORE_TEST_FAULT_LEN");
  const int64_t len = len_env ? atoll(len_env) : 64;
  REQUIRE(len > 0, "KVSTORE_TEST_FAULT_LEN=%s", len_env);
  const int keys[2] = {4, 5}; /* one key per server with two servers */
  KVArrayHandle v[2] = {NewArray(len, KV_FLOAT32), NewArray(len, KV_FLOAT32)};
  KVArrayHandle o[2] = {NewArray(len, KV_FLOAT32), NewArray(len, KV_FLOAT32)};
  REQUIRE_OK(KVStoreInit(kv, 2, keys, v));
  REQUIRE_OK(KVStoreBarrier(kv));
  if (g_rank == 0) {
    char path[512];
    FaultPath(path, sizeof path, "training");
    FILE* f = path[0] ? fopen(path, "w") : NULL;
    if (f) fclose(f);
  }
  /* Rounds go on for a while after the first failure: every pull that succeeds, before or
   * after it, must hold the exact sum of the round, this worker's own push included. */
  float* got = malloc((size_t)len * sizeof(float));
  int rc = 0, first_rc = 0;
  char first_msg[1024] = "";
  double first_t = 0;
  long round = 0, first_round = -1, after = 0;
  for (; round < 1000000 && after < 30; ++round) {
    FillValue(v[0], (g_rank + 1.0) * (round + 1));
    FillValue(v[1], (g_rank + 1.0) * (round + 1));
    rc = KVStorePush(kv, 2, keys, v, 0);
    if (rc == 0) rc = KVStorePull(kv, 2, keys, o, 0);
    for (int k = 0; k < 2 && rc == 0; ++k) {
      rc = KVArrayCopyToHost(o[k], got, (size_t)len * sizeof(float));
      if (rc != 0) break;
      const double want = n * (n + 1) / 2.0 * (round + 1);
      for (int64_t i = 0; i < len; ++i) {
        if (got[i] != want) {
          printf("STALE rank %d round %ld key %d element %lld: %g, want %g (first failure: round %ld)\n",
                 g_rank, round, keys[k], (long long)i, got[i], want, first_round);
          fflush(stdout);
          exit(1);
        }
      }
    }
    if (rc != 0 && first_rc == 0) {
      first_rc = rc;
      first_t = WallClock();
      first_round = round;
      snprintf(first_msg, sizeof first_msg, "%s", KVGetLastError());
    }
    if (first_rc != 0) ++after;
  }
  rc = first_rc;
  if (rc == 0) {
    rc = KVStoreWaitAll(kv);
    first_t = WallClock();
    snprintf(first_msg, sizeof first_msg, "%s", KVGetLastError());
  }
  printf("FAULT_DETECTED rank %d t=%.3f round %ld rc=%s msg=%s\n", g_rank, first_t, first_round,
         KVErrorName(rc), rc == 0 ? "" : first_msg);
  fflush(stdout);
  const double t0 = Now();
  rc = KVStoreFree(kv);
  printf("FREE rank %d after %.2f s rc=%s msg=%s\n", g_rank, Now() - t0, KVErrorName(rc),
         rc == 0 ? "" : KVGetLastError());
  fflush(stdout);
  for (int k = 0; k < 2; ++k) {
    KVArrayFree(v[k]);
    KVArrayFree(o[k]);
  }
  free(got);
  return 0;
}

/* ------------------------------------------------------------------------------------ */

#define RSP_ROWS 64
#define RSP_COLS 20

/* The dense value of the rowsparse key must be want[row] in every column. */
static void ExpectRows(KVArrayHandle dense, const double* want, const char* what, int round) {
  static float buf[RSP_ROWS * RSP_COLS];
  REQUIRE_OK(KVArrayCopyToHost(dense, buf, sizeof(buf)));
  for (int r = 0; r < RSP_ROWS; ++r) {
    for (int c = 0; c < RSP_COLS; ++c) {
      REQUIRE(buf[r * RSP_COLS + c] == want[r], "%s round %d: row %d column %d is %g, expected %g", what, round,
              r, c, (double)buf[r * RSP_COLS + c], want[r]);
    }
  }
}

/* Pushes rows `ids` (increasing) of the rowsparse key, every element `value`. */
static void PushRows(KVStoreHandle kv, int key, const int64_t* ids, int n, float value) {
  const int64_t shape[2] = {RSP_ROWS, RSP_COLS};
  KVArrayHandle v = NULL;
  REQUIRE_OK(KVArrayCreateRowSparse(shape, 2, KV_FLOAT32, KV_CPU, 0, ids, n, &v));
  float data[4 * RSP_COLS];
  for (int i = 0; i < n * RSP_COLS; ++i) data[i] = value;
  REQUIRE_OK(KVArrayCopyFromHost(v, data, (size_t)n * RSP_COLS * sizeof(float)));
  REQUIRE_OK(KVStorePush(kv, 1, &key, &v, 0));
  REQUIRE_OK(KVArrayFree(v));
}

static int RowSparse(KVStoreHandle kv, int rounds) {
  int workers = 0;
  REQUIRE_OK(KVStoreGetGroupSize(kv, &workers));
  REQUIRE(workers <= 4 && rounds <= 5, "rowsparse runs with at most 4 workers and 5 rounds");
  const int key = 7;
  const int64_t shape[2] = {RSP_ROWS, RSP_COLS};
  KVArrayHandle dense = New2D(RSP_ROWS, RSP_COLS, KV_FLOAT32);
  FillValue(dense, 1.0);
  REQUIRE_OK(KVStoreInit(kv, 1, &key, &dense));
  KVArrayHandle out = NULL, ids = NewArray(5, KV_INT64);
  REQUIRE_OK(KVArrayCreateRowSparse(shape, 2, KV_FLOAT32, KV_CPU, 0, NULL, 0, &out));
  const double sum = workers * (workers + 1) / 2.0;
  double want[RSP_ROWS];
  for (int i = 0; i < rounds; ++i) { /* assign */
    const int64_t mine[3] = {g_rank, 10, 32 + i};
    PushRows(kv, key, mine, 3, (float)(g_rank + 1));
    for (int r = 0; r < RSP_ROWS; ++r) want[r] = r < workers ? r + 1 : (r == 10 || r == 32 + i) ? sum : 0.0;
    REQUIRE_OK(KVStorePull(kv, 1, &key, &dense, 0));
    ExpectRows(dense, want, "rowsparse assign", i);
    const int64_t asked[5] = {32 + i, 10, 0, RSP_ROWS - 1, 10};
    REQUIRE_OK(KVArrayCopyFromHost(ids, asked, sizeof(asked)));
    REQUIRE_OK(KVStoreRowSparsePull(kv, 1, &key, &out, &ids, 0));
    int64_t n = 0, got_ids[4] = {0, 0, 0, 0};
    REQUIRE_OK(KVArrayGetNumRows(out, &n));
    REQUIRE(n == 4, "rowsparse round %d: row_sparse_pull gave %lld rows", i, (long long)n);
    REQUIRE_OK(KVArrayGetRowIds(out, got_ids, 4));
    const int64_t sorted[4] = {0, 10, 32 + i, RSP_ROWS - 1};
    float rows[4 * RSP_COLS];
    REQUIRE_OK(KVArrayCopyToHost(out, rows, sizeof(rows)));
    for (int j = 0; j < 4; ++j) {
      REQUIRE(got_ids[j] == sorted[j], "rowsparse round %d: row id %d is %lld", i, j, (long long)got_ids[j]);
      for (int c = 0; c < RSP_COLS; ++c) {
        REQUIRE(rows[j * RSP_COLS + c] == want[sorted[j]], "rowsparse round %d: pulled row %lld is %g, expected %g",
                i, (long long)sorted[j], (double)rows[j * RSP_COLS + c], want[sorted[j]]);
      }
    }
  }
  if (g_rank == 0) REQUIRE_OK(KVStoreSetOptimizer(kv, "sgd(learning_rate=0.5)"));
  REQUIRE_OK(KVStoreBarrier(kv));
  for (int i = 0; i < rounds; ++i) { /* lazy sgd: rows 20 and 40 only */
    const int64_t mine[2] = {20, 40};
    PushRows(kv, key, mine, 2, 1.0f);
    want[20] = want[40] = -0.5 * workers * (i + 1);
    REQUIRE_OK(KVStorePull(kv, 1, &key, &dense, 0));
    ExpectRows(dense, want, "rowsparse lazy sgd", i);
  }
  /* The dist stores pushpull dense values only. */
  const int64_t one = 5;
  KVArrayHandle v = NULL;
  REQUIRE_OK(KVArrayCreateRowSparse(shape, 2, KV_FLOAT32, KV_CPU, 0, &one, 1, &v));
  const int rc = KVStorePushPull(kv, 1, &key, &v, 1, &key, &dense, 0);
  REQUIRE(rc == KV_ERR_NOT_SUPPORTED && strstr(KVGetLastError(), "pushpull"), "row_sparse pushpull: %s %s",
          KVErrorName(rc), KVGetLastError());
  KVArrayFree(v), KVArrayFree(out), KVArrayFree(ids), KVArrayFree(dense);
  return 0;
}

static int ManyKeys(KVStoreHandle kv, int nkeys, int rounds) {
  enum { kLen = 4 };
  int workers = 0;
  REQUIRE_OK(KVStoreGetGroupSize(kv, &workers));
  int* keys = malloc(sizeof(int) * (size_t)nkeys);
  KVArrayHandle* vals = malloc(sizeof(KVArrayHandle) * (size_t)nkeys);
  KVArrayHandle* outs = malloc(sizeof(KVArrayHandle) * (size_t)nkeys);
  REQUIRE(keys && vals && outs, "out of memory");
  for (int i = 0; i < nkeys; ++i) {
    keys[i] = 7 * i + 1; /* not consecutive: placement by hash, not by range */
    vals[i] = NewArray(kLen, KV_FLOAT32);
    outs[i] = NewArray(kLen, KV_FLOAT32);
    FillValue(vals[i], (double)i);
  }
  const double t0 = Now();
  REQUIRE_OK(KVStoreInit(kv, nkeys, keys, vals));
  printf("rank %d: init of %d keys in one call: %.2f s\n", g_rank, nkeys, Now() - t0);
  float got[kLen];
  for (int r = 0; r < rounds; ++r) {
    for (int i = 0; i < nkeys; ++i) FillValue(vals[i], (double)(i + g_rank + r));
    const double t1 = Now();
    if (r % 2 == 0) {
      REQUIRE_OK(KVStorePush(kv, nkeys, keys, vals, 0));
      REQUIRE_OK(KVStorePull(kv, nkeys, keys, outs, 0));
    } else {
      REQUIRE_OK(KVStorePushPull(kv, nkeys, keys, vals, nkeys, keys, outs, 0));
    }
    REQUIRE_OK(KVStoreWaitAll(kv));
    printf("rank %d round %d: %s of %d keys in one call: %.2f s\n", g_rank, r,
           r % 2 == 0 ? "push + pull" : "pushpull", nkeys, Now() - t1);
    /* Sum over workers w of (i + w + r), exact in float32 for these magnitudes. */
    const double base_sum = (double)workers * (workers - 1) / 2;
    for (int i = 0; i < nkeys; ++i) {
      REQUIRE_OK(KVArrayCopyToHost(outs[i], got, sizeof(got)));
      const double want = (double)workers * (i + r) + base_sum;
      for (int e = 0; e < kLen; ++e) {
        REQUIRE(got[e] == (float)want, "round %d key %d element %d: %.9g, expected %.9g", r,
                keys[i], e, got[e], want);
      }
    }
  }
  for (int i = 0; i < nkeys; ++i) {
    KVArrayFree(vals[i]);
    KVArrayFree(outs[i]);
  }
  free(keys);
  free(vals);
  free(outs);
  return 0;
}

static int Controller(int head, const char* body, void* user_data) {
  int* count = (int*)user_data;
  ++*count;
  fprintf(stderr, "controller: head %d body '%s'\n", head, body);
  if (head == 99) {
    const char* id = getenv("DMLC_SERVER_ID");
    if (id != NULL && strcmp(id, "1") == 0) kill(getpid(), SIGKILL);
  }
  return head == 13 ? 1 : 0;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s sync|async|assign|momentum|async_assign|crossed|determinism|api|killed|killed_server|killed_scheduler|faults|zerocopy|rowsparse|manykeys ...\n", argv[0]);
    return 2;
  }
  const char* scenario = argv[1];
  const char* type = strncmp(scenario, "async", 5) == 0 ? "dist_async" : "dist_sync";
  if (getenv("TEST_KV_TYPE")) type = getenv("TEST_KV_TYPE");
  KVStoreHandle kv = NULL;
  if (strcmp(scenario, "faults") == 0) WritePidFile();
  if (!KVIsWorkerNode()) {
    if (strcmp(scenario, "killed_scheduler") == 0 && KVIsSchedulerNode()) {
      pthread_t watch;
      pthread_create(&watch, NULL, SchedulerSuicideWatch, NULL);
    }
    REQUIRE_OK(KVStoreCreate(type, &kv));
    int capable = -1; /* a server program installs optimizers on its own store too */
    REQUIRE_OK(KVStoreIsCapable(kv, KV_CAPABILITY_OPTIMIZER, &capable));
    REQUIRE(capable == 1, "is_capable(optimizer) on a %s: %d", KVIsServerNode() ? "server" : "scheduler", capable);
    int commands = 0;
    int rc = KVStoreRunServer(kv, Controller, &commands);
    if (rc != 0) fprintf(stderr, "RunServer: %s: %s\n", KVErrorName(rc), KVGetLastError());
    KVStoreFree(kv);
    /* After a killed node the survivors' RunServer fails naming it (the driver checks). */
    return rc == 0 ? 0 : 1;
  }
  REQUIRE_OK(KVStoreCreate(type, &kv));
  REQUIRE_OK(KVStoreGetRank(kv, &g_rank));
  check_set_context("rank %d", g_rank);
  int rc = 0;
  if (strcmp(scenario, "sync") == 0 || strcmp(scenario, "async") == 0 ||
      strcmp(scenario, "assign") == 0 || strcmp(scenario, "momentum") == 0) {
    const int rounds = argc > 2 ? atoi(argv[2]) : 3;
    const int str = argc > 3 && strcmp(argv[3], "str") == 0;
    rc = Data(kv, scenario, rounds, str);
  } else if (strcmp(scenario, "crossed") == 0) {
    rc = Crossed(kv);
  } else if (strcmp(scenario, "async_assign") == 0) {
    rc = AsyncAssign(kv);
  } else if (strcmp(scenario, "determinism") == 0) {
    REQUIRE(argc > 2, "determinism needs an output file");
    rc = Determinism(kv, argv[2]);
  } else if (strcmp(scenario, "api") == 0) {
    rc = Api(kv);
  } else if (strcmp(scenario, "killed") == 0) {
    rc = Killed(kv);
  } else if (strcmp(scenario, "killed_server") == 0) {
    rc = KilledServer(kv);
  } else if (strcmp(scenario, "faults") == 0) {
    rc = Faults(kv);
    return rc; /* Faults freed the store */
  } else if (strcmp(scenario, "killed_scheduler") == 0) {
    rc = KilledScheduler(kv);
    printf("PASS %s rank %d\n", scenario, g_rank);
    return rc; /* KilledScheduler freed the store */
  } else if (strcmp(scenario, "rowsparse") == 0) {
    rc = RowSparse(kv, argc > 2 ? atoi(argv[2]) : 3);
  } else if (strcmp(scenario, "manykeys") == 0) {
    rc = ManyKeys(kv, argc > 2 ? atoi(argv[2]) : 100000, argc > 3 ? atoi(argv[3]) : 2);
  } else if (strcmp(scenario, "zerocopy") == 0) {
    rc = ZeroCopy(kv, argc > 2 ? atoi(argv[2]) : 3);
  } else if (strcmp(scenario, "values") == 0) {
    rc = Values(kv);
  } else {
    REQUIRE(0, "unknown scenario %s", scenario);
  }
  const int free_rc = KVStoreFree(kv);
  if (strcmp(scenario, "killed") == 0) {
    /* The exit barrier cannot complete without worker 2, and KVStoreFree says so. */
    REQUIRE(free_rc == KV_ERR_PEER_DEAD || free_rc == KV_ERR_TIMEOUT, "KVStoreFree after a dead worker: %s %s",
          KVErrorName(free_rc), KVGetLastError());
  } else if (strcmp(scenario, "killed_server") == 0) {
    /* The job lost server 1: KVStoreFree says so even though this worker's calls ended. */
    REQUIRE(free_rc == KV_ERR_PEER_DEAD && strstr(KVGetLastError(), "server 1"),
          "KVStoreFree after a dead server: %s %s", KVErrorName(free_rc), KVGetLastError());
  } else {
    REQUIRE(free_rc == 0, "KVStoreFree: %s %s", KVErrorName(free_rc), KVGetLastError());
  }
  printf("PASS %s rank %d\n", scenario, g_rank);
  return rc;
}
