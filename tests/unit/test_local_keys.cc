// test_local_keys.cc - the key registry of the in-process stores under many keys, through
// the C ABI: int keys found by direct index and by hash (negative, far apart, and sparse
// keys that a later, denser init brings into the direct table), string keys; pushes with
// keys repeated and out of order (summed per key, first-appearance order of the updater's
// calls); pushpull's same-set rule; all-or-nothing validation of a call of many keys; and a
// push into another store from inside an updater (the per-call lists are per call, not per
// thread).
#include <kvstore/kvstore.h>

#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "../common/check.h"

namespace {

KVArrayHandle Make(float v, int64_t n = 2) {
  KVArrayHandle a = nullptr;
  REQUIRE_OK(KVArrayCreate(&n, 1, KV_FLOAT32, KV_CPU, 0, &a));
  REQUIRE_OK(KVArrayFill(a, v));
  return a;
}

float First(KVArrayHandle a) {
  float v[2] = {0, 0};
  REQUIRE_OK(KVArrayCopyToHost(a, v, sizeof v));
  return v[0];
}

void FreeAll(std::vector<KVArrayHandle>& arrays) {
  for (KVArrayHandle a : arrays) KVArrayFree(a);
  arrays.clear();
}

// Keys in several inits: far apart and negative (hash), then a dense run that grows the
// direct table over an earlier sparse key (5000, found by hash before, by index after).
void TestIntKeyMaps() {
  KVStoreHandle kv = nullptr;
  REQUIRE_OK(KVStoreCreate("local", &kv));
  const std::vector<std::vector<int>> inits = {{5000, -7, 2000000000}, {0, 1, 2}, {}, {}};
  std::vector<int> dense;
  for (int k = 3; k < 6000; ++k) {
    if (k != 5000) dense.push_back(k);
  }
  std::vector<int> all;
  for (int pass = 0; pass < 2; ++pass) {
    const std::vector<int>& keys = pass == 0 ? inits[0] : inits[1];
    std::vector<KVArrayHandle> vals;
    for (int k : keys) vals.push_back(Make(static_cast<float>(k % 1000)));
    REQUIRE_OK(KVStoreInit(kv, static_cast<int>(keys.size()), keys.data(), vals.data()));
    FreeAll(vals);
    all.insert(all.end(), keys.begin(), keys.end());
  }
  {
    std::vector<KVArrayHandle> vals;
    for (int k : dense) vals.push_back(Make(static_cast<float>(k % 1000)));
    REQUIRE_OK(KVStoreInit(kv, static_cast<int>(dense.size()), dense.data(), vals.data()));
    FreeAll(vals);
    all.insert(all.end(), dense.begin(), dense.end());
  }
  // Every key, pulled in one call in reverse order: each finds its own value.
  std::vector<int> rev(all.rbegin(), all.rend());
  std::vector<KVArrayHandle> outs;
  for (size_t i = 0; i < rev.size(); ++i) outs.push_back(Make(-1));
  CHECK_OK(KVStorePull(kv, static_cast<int>(rev.size()), rev.data(), outs.data(), 0));
  int wrong = 0;
  for (size_t i = 0; i < rev.size(); ++i) wrong += First(outs[i]) != static_cast<float>(rev[i] % 1000);
  CHECK_MSG(wrong == 0, "%d of %zu keys pulled a wrong value", wrong, rev.size());
  FreeAll(outs);
  // Each key once more: init refuses them all, including the one moved into the direct table.
  for (int k : {5000, -7, 2000000000, 0, 5999}) {
    KVArrayHandle v = Make(1);
    CHECK_ERR(KVStoreInit(kv, 1, &k, &v), KV_ERR_DUPLICATE_KEY, "already initialised");
    KVArrayFree(v);
  }
  // Keys never initialised, in and beyond the direct table's range.
  for (int k : {6000, 6001, -1, 1 << 30}) {
    KVArrayHandle o = Make(0);
    CHECK_ERR(KVStorePull(kv, 1, &k, &o, 0), KV_ERR_UNKNOWN_KEY, "not initialised");
    KVArrayFree(o);
  }
  KVStoreFree(kv);
}

struct Calls {
  std::vector<int> keys;
  KVStoreHandle other = nullptr;  // pushed into from inside the updater when set
};

int RecordingUpdater(int key, KVArrayHandle recv, KVArrayHandle stored, void* user) {
  auto* calls = static_cast<Calls*>(user);
  calls->keys.push_back(key);
  if (calls->other) {
    const int k = 0;
    if (KVStorePush(calls->other, 1, &k, &recv, 0) != 0) return -1;
  }
  return KVArrayCopy(stored, recv);
}

// Repeated and unordered keys: values summed per key, the updater called once per key in
// first-appearance order; the same through a nested push into another store.
void TestRepeatedKeys(bool nested) {
  KVStoreHandle kv = nullptr, other = nullptr;
  REQUIRE_OK(KVStoreCreate("local", &kv));
  REQUIRE_OK(KVStoreCreate("local", &other));
  const int n = 100;
  std::vector<int> keys;
  std::vector<KVArrayHandle> vals;
  for (int k = 0; k < n; ++k) {
    keys.push_back(k);
    vals.push_back(Make(0));
  }
  REQUIRE_OK(KVStoreInit(kv, n, keys.data(), vals.data()));
  const int zero = 0;
  REQUIRE_OK(KVStoreInit(other, 1, &zero, vals.data()));
  FreeAll(vals);
  Calls calls;
  if (nested) calls.other = other;
  REQUIRE_OK(KVStoreSetUpdater(kv, RecordingUpdater, &calls, nullptr));
  // 99, 98, ..., 0, then every even key again: odd keys get 1, even keys 1 + 2.
  std::vector<int> push;
  for (int k = n - 1; k >= 0; --k) {
    push.push_back(k);
    vals.push_back(Make(1));
  }
  for (int k = 0; k < n; k += 2) {
    push.push_back(k);
    vals.push_back(Make(2));
  }
  CHECK_OK(KVStorePush(kv, static_cast<int>(push.size()), push.data(), vals.data(), 0));
  FreeAll(vals);
  CHECK(calls.keys.size() == static_cast<size_t>(n));
  bool order = calls.keys.size() == static_cast<size_t>(n);
  for (size_t i = 0; order && i < calls.keys.size(); ++i) order = calls.keys[i] == n - 1 - static_cast<int>(i);
  CHECK_MSG(order, "the updater ran the keys out of first-appearance order");
  std::vector<KVArrayHandle> outs;
  for (int k = 0; k < n; ++k) outs.push_back(Make(-1));
  CHECK_OK(KVStorePull(kv, n, keys.data(), outs.data(), 0));
  int wrong = 0;
  for (int k = 0; k < n; ++k) wrong += First(outs[k]) != (k % 2 == 0 ? 3.0f : 1.0f);
  CHECK_MSG(wrong == 0, "%d keys hold a wrong sum", wrong);
  FreeAll(outs);
  if (nested) {  // the other store's key 0 got the last value the updater saw
    KVArrayHandle o = Make(-1);
    CHECK_OK(KVStorePull(other, 1, &zero, &o, 0));
    CHECK(First(o) == 3.0f);
    KVArrayFree(o);
  }
  KVStoreFree(kv);
  KVStoreFree(other);
}

// A bad shape or an unknown key late in a call of many keys changes none of them; pushpull
// refuses output keys that are not the pushed set, in any order.
void TestAllOrNothing() {
  KVStoreHandle kv = nullptr;
  REQUIRE_OK(KVStoreCreate("local", &kv));
  const int n = 5000;
  std::vector<int> keys;
  std::vector<KVArrayHandle> vals, outs;
  for (int k = 0; k < n; ++k) {
    keys.push_back(k);
    vals.push_back(Make(1));
    outs.push_back(Make(-1));
  }
  REQUIRE_OK(KVStoreInit(kv, n, keys.data(), vals.data()));
  KVArrayHandle wide = Make(7, 3);
  std::swap(vals[n - 1], wide);
  CHECK_ERR(KVStorePush(kv, n, keys.data(), vals.data(), 0), KV_ERR_SHAPE_MISMATCH, "push to key 4999");
  std::swap(vals[n - 1], wide);
  for (KVArrayHandle v : vals) REQUIRE_OK(KVArrayFill(v, 5));
  keys[n - 1] = n;
  CHECK_ERR(KVStorePush(kv, n, keys.data(), vals.data(), 0), KV_ERR_UNKNOWN_KEY, "key 5000");
  keys[n - 1] = n - 1;
  CHECK_OK(KVStorePull(kv, n, keys.data(), outs.data(), 0));
  int changed = 0;
  for (KVArrayHandle o : outs) changed += First(o) != 1.0f;
  CHECK_MSG(changed == 0, "%d keys changed by failed pushes", changed);
  // pushpull: reversed outputs are the same set; one key short is not.
  std::vector<int> rev(keys.rbegin(), keys.rend());
  CHECK_OK(KVStorePushPull(kv, n, keys.data(), vals.data(), n, rev.data(), outs.data(), 0));
  CHECK(First(outs[0]) == 5.0f);
  CHECK_ERR(KVStorePushPull(kv, n, keys.data(), vals.data(), n - 1, rev.data(), outs.data(), 0),
            KV_ERR_INVALID_ARGUMENT, "same set");
  FreeAll(vals);
  FreeAll(outs);
  KVArrayFree(wide);
  KVStoreFree(kv);
}

// String keys: found by name in any order, unknown ones refused.
void TestStrKeys() {
  KVStoreHandle kv = nullptr;
  REQUIRE_OK(KVStoreCreate("local", &kv));
  const int n = 3000;
  std::vector<std::string> names;
  std::vector<const char*> keys;
  std::vector<KVArrayHandle> vals, outs;
  for (int k = 0; k < n; ++k) names.push_back("w" + std::to_string(k));
  for (int k = 0; k < n; ++k) {
    keys.push_back(names[k].c_str());
    vals.push_back(Make(static_cast<float>(k)));
    outs.push_back(Make(-1));
  }
  REQUIRE_OK(KVStoreInitStr(kv, n, keys.data(), vals.data()));
  std::vector<const char*> rev(keys.rbegin(), keys.rend());
  CHECK_OK(KVStorePullStr(kv, n, rev.data(), outs.data(), 0));
  int wrong = 0;
  for (int i = 0; i < n; ++i) wrong += First(outs[i]) != static_cast<float>(n - 1 - i);
  CHECK_MSG(wrong == 0, "%d string keys pulled a wrong value", wrong);
  const char* unknown = "w3000";
  CHECK_ERR(KVStorePullStr(kv, 1, &unknown, outs.data(), 0), KV_ERR_UNKNOWN_KEY, "\"w3000\"");
  FreeAll(vals);
  FreeAll(outs);
  KVStoreFree(kv);
}

// String keys over several inits (the index grows with keys already in it), long ones
// beside short ones that are their prefixes, and a push without an updater that repeats
// keys out of order (the values summed per key; a repeated key's values are summed, not
// the last one kept).
void TestStrKeysGrownAndRepeated() {
  KVStoreHandle kv = nullptr;
  REQUIRE_OK(KVStoreCreate("local", &kv));
  std::vector<std::string> names;
  for (int k = 0; k < 2000; ++k) {
    names.push_back(k % 2 ? "w" + std::to_string(k) : std::string(40, 'p') + std::to_string(k));
  }
  std::vector<const char*> keys;
  for (const std::string& name : names) keys.push_back(name.c_str());
  for (int first : {0, 1, 10, 100, 1000}) {  // inits of 1, 9, 90, 900 and 1000 keys
    const int last = first == 0 ? 1 : first == 1000 ? 2000 : first * 10;
    std::vector<KVArrayHandle> vals;
    for (int k = first; k < last; ++k) vals.push_back(Make(0));
    REQUIRE_OK(KVStoreInitStr(kv, last - first, keys.data() + first, vals.data()));
    FreeAll(vals);
  }
  // Every key in reverse order with 1, then the even ones again with 2: sums of 1 and 3.
  std::vector<const char*> push;
  std::vector<KVArrayHandle> vals;
  for (int k = 1999; k >= 0; --k) {
    push.push_back(keys[k]);
    vals.push_back(Make(1));
  }
  for (int k = 0; k < 2000; k += 2) {
    push.push_back(keys[k]);
    vals.push_back(Make(2));
  }
  CHECK_OK(KVStorePushStr(kv, static_cast<int>(push.size()), push.data(), vals.data(), 0));
  FreeAll(vals);
  std::vector<KVArrayHandle> outs;
  for (int k = 0; k < 2000; ++k) outs.push_back(Make(-1));
  CHECK_OK(KVStorePullStr(kv, 2000, keys.data(), outs.data(), 0));
  int wrong = 0;
  for (int k = 0; k < 2000; ++k) wrong += First(outs[k]) != (k % 2 == 0 ? 3.0f : 1.0f);
  CHECK_MSG(wrong == 0, "%d string keys hold a wrong sum", wrong);
  const std::string prefix(40, 'p');  // a prefix of the long keys, never initialised
  const char* unknown = prefix.c_str();
  CHECK_ERR(KVStorePullStr(kv, 1, &unknown, outs.data(), 0), KV_ERR_UNKNOWN_KEY, "not initialised");
  FreeAll(outs);
  KVStoreFree(kv);
}

// A -> B -> A: A's updater pushes to store B, whose updater pushes key 1 of A back. A's push
// of key 0 holds the lock that key 1 shares, so the inner push must be refused
// (INVALID_ARGUMENT, as any data call of a store from inside its own updater), not wait for
// itself. alarm() turns a self-deadlock into a failure instead of a hang.
struct Chain {
  KVStoreHandle a = nullptr, b = nullptr;
  int inner_rc = 0;
  int depth = 0;
};

int ChainUpdaterA(int, KVArrayHandle recv, KVArrayHandle stored, void* user) {
  Chain* c = static_cast<Chain*>(user);
  const int zero = 0;
  if (c->depth++ == 0 && KVStorePush(c->b, 1, &zero, &recv, 0) != 0) return 1;
  return KVArrayCopy(stored, recv);
}

int ChainUpdaterB(int, KVArrayHandle recv, KVArrayHandle stored, void* user) {
  Chain* c = static_cast<Chain*>(user);
  const int one = 1;
  c->inner_rc = KVStorePush(c->a, 1, &one, &recv, 0);
  return KVArrayCopy(stored, recv);
}

void TestUpdaterChainBackIntoStore() {
  Chain c;
  REQUIRE_OK(KVStoreCreate("local", &c.a));
  REQUIRE_OK(KVStoreCreate("local", &c.b));
  const int keys[2] = {0, 1};
  std::vector<KVArrayHandle> vals = {Make(0), Make(0)};
  REQUIRE_OK(KVStoreInit(c.a, 2, keys, vals.data()));
  REQUIRE_OK(KVStoreInit(c.b, 1, keys, vals.data()));
  FreeAll(vals);
  REQUIRE_OK(KVStoreSetUpdater(c.a, ChainUpdaterA, &c, nullptr));
  REQUIRE_OK(KVStoreSetUpdater(c.b, ChainUpdaterB, &c, nullptr));
  KVArrayHandle v = Make(5);
  alarm(30);
  CHECK_OK(KVStorePush(c.a, 1, &keys[0], &v, 0));
  alarm(0);
  CHECK_MSG(c.inner_rc == KV_ERR_INVALID_ARGUMENT, "a push back into store A from B's updater returned %d",
            c.inner_rc);
  KVArrayHandle out = Make(-1);
  CHECK_OK(KVStorePull(c.a, 1, &keys[1], &out, 0));
  CHECK(First(out) == 0.0f);  // the refused inner push changed nothing
  CHECK_OK(KVStorePull(c.a, 1, &keys[0], &out, 0));
  CHECK(First(out) == 5.0f);
  KVArrayFree(out);
  KVArrayFree(v);
  KVStoreFree(c.b);
  KVStoreFree(c.a);
}

}  // namespace

int main() {
  TestIntKeyMaps();
  TestRepeatedKeys(false);
  TestRepeatedKeys(true);
  TestAllOrNothing();
  TestStrKeys();
  TestStrKeysGrownAndRepeated();
  TestUpdaterChainBackIntoStore();
  return check_summary_named("unit_local_keys");
}
