// test_local_alloc_failure.cc - an in-process push that fails for want of memory, at each
// allocation it makes in turn, returns KV_ERR_OUT_OF_MEMORY and leaves nothing behind for
// the thread's next call: the per-call lists a thread reuses (store/local_keys.h,
// ScratchLease) must come back empty however far the failed call got in filling them.
//
// The program replaces the global operator new (failing_new.h), and a sweep fails the 1st,
// 2nd, ... allocation of one push of six keys, until the push needs no more allocations
// than that and succeeds. After each failed push, with the caller's
// arrays still alive, a push of one known value to key 0 and a pull must give exactly that
// value (a value left in the reused lists would be summed into it), and the keys the failed
// push did not write must hold what they held before it.
//
// The per-call lists are also kept between calls whatever the store's size: a push of two
// keys out of order in a store of 200,000 keys (its duplicate check uses one bit per key of
// the store), repeated, allocates nothing.
#include <kvstore/kvstore.h>

#include <limits>
#include <vector>

#include "../common/check.h"
#include "../common/failing_new.h"

namespace {

constexpr int kKeys = 6;
constexpr int64_t kLen = 4;

KVArrayHandle Make(float v) {
  int64_t n = kLen;
  KVArrayHandle a = nullptr;
  REQUIRE_OK(KVArrayCreate(&n, 1, KV_FLOAT32, KV_CPU, 0, &a));
  REQUIRE_OK(KVArrayFill(a, v));
  return a;
}

float Pull(KVStoreHandle s, int key) {
  KVArrayHandle out = Make(-1);
  REQUIRE_OK(KVStorePull(s, 1, &key, &out, 0));
  float v[kLen];
  REQUIRE_OK(KVArrayCopyToHost(out, v, sizeof v));
  KVArrayFree(out);
  return v[0];
}

// Returns true when the push under test succeeded (the sweep is over).
bool FailAt(long fail_at) {
  int keys[kKeys] = {0, 1, 2, 3, 4, 5};
  KVStoreHandle s = nullptr;
  REQUIRE_OK(KVStoreCreate("local", &s));
  KVArrayHandle init[kKeys];
  for (int i = 0; i < kKeys; ++i) init[i] = Make(0);
  REQUIRE_OK(KVStoreInit(s, kKeys, keys, init));
  KVArrayHandle warm[3] = {Make(1), Make(1), Make(1)};
  REQUIRE_OK(KVStorePush(s, 3, keys, warm, 0));  // keys 0-2 hold 1 (no updater: assign)

  KVArrayHandle vals[kKeys];
  for (int i = 0; i < kKeys; ++i) vals[i] = Make(100);
    FailNthAllocation(fail_at);
  const int rc = KVStorePush(s, kKeys, keys, vals, 0);
  StopFailingAllocations();

  if (rc == 0) {
    for (int k = 0; k < kKeys; ++k) CHECK_MSG(Pull(s, k) == 100, "key %d after the push that succeeded", k);
  } else {
    CHECK_MSG(rc == KV_ERR_OUT_OF_MEMORY, "allocation %ld failed: rc %d (%s)", fail_at, rc,
              KVGetLastError());
    // A key the failed push did not reach holds its old value; one it did, the new one.
    for (int k = 1; k < kKeys; ++k) {
      const float v = Pull(s, k);
      const float before = k < 3 ? 1.0f : 0.0f;
      CHECK_MSG(v == before || v == 100, "allocation %ld failed: key %d holds %g", fail_at, k, v);
    }
    KVArrayHandle two = Make(2);
    CHECK_OK(KVStorePush(s, 1, keys, &two, 0));
    const float got = Pull(s, 0);
    CHECK_MSG(got == 2, "allocation %ld failed: the next push of 2 to key 0 left %g", fail_at, got);
    KVArrayFree(two);
  }
  for (KVArrayHandle a : vals) KVArrayFree(a);
  for (KVArrayHandle a : warm) KVArrayFree(a);
  for (KVArrayHandle a : init) KVArrayFree(a);
  REQUIRE_OK(KVStoreFree(s));
  return rc == 0;
}

// Counts the allocations of `call` (failing none).
template <typename Call>
long AllocationsOf(Call&& call) {
  FailNthAllocation(std::numeric_limits<long>::max());
  call();
  const long n = failing_new::allocations.load();
  StopFailingAllocations();
  return n;
}

void TestSteadyCallsInABigStore() {
  constexpr int kBig = 200000;
  KVStoreHandle s = nullptr;
  REQUIRE_OK(KVStoreCreate("local", &s));
  std::vector<int> keys(kBig);
  std::vector<KVArrayHandle> init(kBig);
  for (int i = 0; i < kBig; ++i) {
    keys[i] = i;
    init[i] = Make(0);
  }
  REQUIRE_OK(KVStoreInit(s, kBig, keys.data(), init.data()));
  for (KVArrayHandle a : init) KVArrayFree(a);
  int two[2] = {kBig - 1, 0};  // out of order: the duplicate check runs
  KVArrayHandle vals[2] = {Make(1), Make(2)};
  for (int i = 0; i < 2; ++i) REQUIRE_OK(KVStorePush(s, 2, two, vals, 0));
  int rc = -1;
  const long n = AllocationsOf([&] { rc = KVStorePush(s, 2, two, vals, 0); });
  CHECK_OK(rc);
  CHECK_MSG(n == 0, "a repeated push of 2 keys out of order in a store of %d keys made %ld allocations", kBig, n);
  CHECK(Pull(s, 0) == 2 && Pull(s, kBig - 1) == 1);
  for (KVArrayHandle a : vals) KVArrayFree(a);
  REQUIRE_OK(KVStoreFree(s));
}

}  // namespace

int main() {
  TestSteadyCallsInABigStore();
  long fail_at = 1;
  while (!FailAt(fail_at)) {
    if (++fail_at > 10000) {
      CHECK_MSG(false, "a push of %d keys still fails after %ld allocations", kKeys, fail_at);
      break;
    }
  }
  CHECK_MSG(fail_at > 1, "the push under test allocated nothing: the sweep tested no failure");
  return check_summary();
}
