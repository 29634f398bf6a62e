// test_arg_gates.cc - push, pull and pushpull of the in-process store hold their arrays'
// call gates inside their own passes (Store::enters_array_gates, store/arg_gates.h), not in
// c_api's: every gate a call entered is left again on every path (keys in order, out of
// order and repeated, with an updater, and each refusal: unknown key, shape, row_sparse
// output, pushpull's key sets), a row_sparse output is refused with c_api's message, and
// an array with a pending write (a distributed pull into it) is waited on before it is
// read: its new data is what the call sees, or its error is what the call returns. A call
// holds every array it reached until it returns: freeing one it is done with while it still
// copies others is refused (BUSY, kvstore.h). Every case runs with the profiler off (the
// store's passes) and on (c_api's CheckList first).
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/array.h"
#include "kvstore/kvstore.h"

extern "C" {
#include "../common/check.h"
}

namespace {

// More than the lookups' prefetch distance (16 keys ahead), so the gates of later arrays
// are entered and left by the same loops that prefetch them.
constexpr int kKeys = 40;

KVArrayHandle Make(float v) {
  const int64_t n = 4;
  KVArrayHandle a = nullptr;
  REQUIRE_OK(KVArrayCreate(&n, 1, KV_FLOAT32, KV_CPU, 0, &a));
  REQUIRE_OK(KVArrayFill(a, v));
  return a;
}

float First(KVArrayHandle a) {
  float v[4] = {0, 0, 0, 0};
  REQUIRE_OK(KVArrayCopyToHost(a, v, sizeof v));
  return v[0];
}

// A local store with keys 0..kKeys-1 holding 1, and fresh values (2) and outputs (0).
struct Call {
  KVStoreHandle kv = nullptr;
  std::vector<int> keys;
  std::vector<KVArrayHandle> vals, outs;

  Call() {
    REQUIRE_OK(KVStoreCreate("local", &kv));
    for (int i = 0; i < kKeys; ++i) {
      keys.push_back(i);
      vals.push_back(Make(1));
    }
    REQUIRE_OK(KVStoreInit(kv, kKeys, keys.data(), vals.data()));
    for (int i = 0; i < kKeys; ++i) {
      REQUIRE_OK(KVArrayFill(vals[i], 2));
      outs.push_back(Make(0));
    }
  }
  // Frees every array: KVArrayFree refuses (BUSY) an array whose gate a call still holds.
  ~Call() {
    for (std::vector<KVArrayHandle>* list : {&vals, &outs}) {
      for (size_t i = 0; i < list->size(); ++i) {
        const int rc = KVArrayFree((*list)[i]);
        CHECK_MSG(rc == KV_OK, "%s %zu was not left by the call: %s %s", list == &vals ? "value" : "output", i,
                  KVErrorName(rc), KVGetLastError());
      }
    }
    REQUIRE_OK(KVStoreFree(kv));
  }
  // Every stored value still `v`, read by a pull into fresh arrays.
  void CheckStored(float v, const char* what) {
    std::vector<KVArrayHandle> fresh;
    for (int i = 0; i < kKeys; ++i) fresh.push_back(Make(-1));
    REQUIRE_OK(KVStorePull(kv, kKeys, keys.data(), fresh.data(), 0));
    for (int i = 0; i < kKeys; ++i) {
      CHECK_MSG(First(fresh[i]) == v, "%s: key %d holds %g, not %g", what, i, First(fresh[i]), v);
      KVArrayFree(fresh[i]);
    }
  }
};

void TestSuccess() {
  {
    Call c;
    CHECK_OK(KVStorePush(c.kv, kKeys, c.keys.data(), c.vals.data(), 0));
    CHECK_OK(KVStorePull(c.kv, kKeys, c.keys.data(), c.outs.data(), 0));
    CHECK(First(c.outs[kKeys - 1]) == 2);
    CHECK_OK(KVStorePushPull(c.kv, kKeys, c.keys.data(), c.vals.data(), kKeys, c.keys.data(), c.outs.data(), 0));
  }
  {  // keys reversed and key 7 twice: the push sums per key, its gates are left at the end
    Call c;
    std::vector<int> keys(c.keys.rbegin(), c.keys.rend());
    keys.push_back(7);
    std::vector<KVArrayHandle> vals(c.vals.rbegin(), c.vals.rend());
    vals.push_back(c.vals[0]);  // the same array twice: two gates entered, both left
    CHECK_OK(KVStorePush(c.kv, kKeys + 1, keys.data(), vals.data(), 0));
    std::vector<KVArrayHandle> outs(c.outs.rbegin(), c.outs.rend());
    CHECK_OK(KVStorePull(c.kv, kKeys, keys.data(), outs.data(), 0));
    CHECK(First(c.outs[7]) == 4);
    CHECK(First(c.outs[8]) == 2);
  }
  {  // an updater: the values are read again after the sums, so they are held to the end
    Call c;
    CHECK_OK(KVStoreSetUpdater(
        c.kv, [](int, KVArrayHandle recv, KVArrayHandle stored, void*) { return KVArrayBinary(KV_OP_ADD, stored, recv, stored); },
        nullptr, nullptr));
    CHECK_OK(KVStorePushPull(c.kv, kKeys, c.keys.data(), c.vals.data(), kKeys, c.keys.data(), c.outs.data(), 0));
    CHECK(First(c.outs[kKeys - 1]) == 3);
  }
}

// Each refusal leaves every stored value as it was and every gate it entered (~Call).
void TestRefusals() {
  {
    Call c;
    c.keys[kKeys - 1] = 1000;  // not initialised: found after every other gate was entered
    CHECK_ERR(KVStorePush(c.kv, kKeys, c.keys.data(), c.vals.data(), 0), KV_ERR_UNKNOWN_KEY, "key 1000");
    CHECK_ERR(KVStorePull(c.kv, kKeys, c.keys.data(), c.outs.data(), 0), KV_ERR_UNKNOWN_KEY, "key 1000");
    CHECK_ERR(KVStorePushPull(c.kv, kKeys, c.keys.data(), c.vals.data(), kKeys, c.keys.data(), c.outs.data(), 0),
              KV_ERR_UNKNOWN_KEY, "key 1000");
    c.keys[kKeys - 1] = kKeys - 1;
    std::vector<int> other(c.keys);
    other[3] = 4;
    CHECK_ERR(KVStorePushPull(c.kv, kKeys, c.keys.data(), c.vals.data(), kKeys, other.data(), c.outs.data(), 0),
              KV_ERR_INVALID_ARGUMENT, "same set");
    c.CheckStored(1, "after unknown keys");
  }
  {
    Call c;
    const int64_t n = 5;
    KVArrayHandle wrong = nullptr;
    REQUIRE_OK(KVArrayCreate(&n, 1, KV_FLOAT32, KV_CPU, 0, &wrong));
    std::swap(wrong, c.vals[20]);
    CHECK_ERR(KVStorePush(c.kv, kKeys, c.keys.data(), c.vals.data(), 0), KV_ERR_SHAPE_MISMATCH, "key 20");
    std::swap(wrong, c.vals[20]);
    std::swap(wrong, c.outs[20]);
    CHECK_ERR(KVStorePull(c.kv, kKeys, c.keys.data(), c.outs.data(), 0), KV_ERR_SHAPE_MISMATCH, "key 20");
    std::swap(wrong, c.outs[20]);
    CHECK(First(c.outs[19]) == 0);
    CHECK_OK(KVArrayFree(wrong));
    c.CheckStored(1, "after shape mismatches");
  }
  {
    Call c;
    const int64_t shape = 4, row = 1;
    KVArrayHandle sparse = nullptr;
    REQUIRE_OK(KVArrayCreateRowSparse(&shape, 1, KV_FLOAT32, KV_CPU, 0, &row, 1, &sparse));
    std::swap(sparse, c.outs[30]);
    CHECK_ERR(KVStorePull(c.kv, kKeys, c.keys.data(), c.outs.data(), 0), KV_ERR_NOT_SUPPORTED,
              "pull: output 30 (key 30) is row_sparse; it writes dense outputs");
    CHECK_ERR(KVStorePushPull(c.kv, kKeys, c.keys.data(), c.vals.data(), kKeys, c.keys.data(), c.outs.data(), 0),
              KV_ERR_NOT_SUPPORTED, "pushpull: output 30 (key 30) is row_sparse; it writes dense outputs");
    CHECK(First(c.outs[0]) == 0);
    KVArrayFree(sparse);
    c.CheckStored(1, "after row_sparse outputs");
  }
}

// A pending write into argument `index` of `call` (a value when `value`, else an output)
// ends 50 ms after the call started, with `code`: the call has not returned before, and
// returns what it would have with the array's new data (3), or the write's error.
void PendingWrite(bool value, bool pushpull, int code) {
  Call c;
  const int index = 25;
  KVArrayHandle a = value ? c.vals[index] : c.outs[index];
  a->BeginPendingWrite();
  std::atomic<bool> done{false};
  int rc = -1;
  std::thread caller([&] {
    if (pushpull) rc = KVStorePushPull(c.kv, kKeys, c.keys.data(), c.vals.data(), kKeys, c.keys.data(), c.outs.data(), 0);
    else if (value) rc = KVStorePush(c.kv, kKeys, c.keys.data(), c.vals.data(), 0);
    else rc = KVStorePull(c.kv, kKeys, c.keys.data(), c.outs.data(), 0);
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK_MSG(!done, "a %s returned before the pending write into its %s ended", pushpull ? "pushpull" : value ? "push" : "pull",
            value ? "value" : "output");
  const float three[4] = {3, 3, 3, 3};
  if (code == KV_OK) std::memcpy(a->data(), three, sizeof three);  // the producer's write
  a->EndPendingWrite(code, code == KV_OK ? "" : "the pending write failed");
  caller.join();
  if (code != KV_OK) {
    CHECK_MSG(rc == code, "rc %d, not the pending write's %d", rc, code);
    c.CheckStored(1, "after a failed pending write");
    return;
  }
  CHECK_MSG(rc == KV_OK, "rc %d: %s", rc, KVGetLastError());
  if (value) {
    REQUIRE_OK(KVStorePull(c.kv, kKeys, c.keys.data(), c.outs.data(), 0));
    CHECK(First(c.outs[index]) == 3);  // the value as the pending write left it
    CHECK(First(c.outs[index + 1]) == 2);
  } else if (!pushpull) {
    CHECK(First(c.outs[index]) == 1);  // the pull's data, not the pending write's
  }
}

// A push or pull of a small key 0 then four keys of 16 MiB: another thread tries to free the
// small array from the moment the call holds the last one (the lookup holds them in order).
// A free that succeeds while the call still holds its last array (left first, arg_gates.h)
// freed an argument of a running call.
void HeldUntilReturn(bool pull) {
  constexpr int kBig = 4;
  const int64_t big = int64_t{4} << 20, small = 4;
  KVStoreHandle kv = nullptr;
  REQUIRE_OK(KVStoreCreate("local", &kv));
  std::vector<int> keys;
  std::vector<KVArrayHandle> args;
  for (int i = 0; i <= kBig; ++i) {
    KVArrayHandle a = nullptr;
    REQUIRE_OK(KVArrayCreate(i == 0 ? &small : &big, 1, KV_FLOAT32, KV_CPU, 0, &a));
    REQUIRE_OK(KVArrayFill(a, 1));
    keys.push_back(i);
    args.push_back(a);
  }
  REQUIRE_OK(KVStoreInit(kv, kBig + 1, keys.data(), args.data()));
  const kvstore::CallGate& last = args[kBig]->call_gate();
  std::atomic<bool> done{false}, freed_while_held{false}, freed{false};
  std::thread freer([&] {
    while (!done.load() && last.calls() == 0) std::this_thread::yield();  // array 0 is held too
    while (!done.load()) {
      if (KVArrayFree(args[0]) == KV_OK) {
        freed_while_held = last.calls() > 0;
        freed = true;
        return;
      }
    }
  });
  const int rc = pull ? KVStorePull(kv, kBig + 1, keys.data(), args.data(), 0)
                      : KVStorePush(kv, kBig + 1, keys.data(), args.data(), 0);
  done = true;
  freer.join();
  CHECK_OK(rc);
  CHECK_MSG(!freed_while_held.load(), "%s: array 0 was freed while the call still held array %d", pull ? "pull" : "push",
            kBig);
  if (!freed.load()) REQUIRE_OK(KVArrayFree(args[0]));
  for (int i = 1; i <= kBig; ++i) REQUIRE_OK(KVArrayFree(args[i]));
  REQUIRE_OK(KVStoreFree(kv));
}

void TestPendingWrites() {
  for (int code : {KV_OK, KV_ERR_TIMEOUT}) {
    PendingWrite(true, false, code);
    PendingWrite(false, false, code);
    PendingWrite(true, true, code);
    PendingWrite(false, true, code);
  }
}

}  // namespace

int main() {
  for (int profiled = 0; profiled < 2; ++profiled) {
    check_set_context("%s", profiled ? "profiler on" : "profiler off");
    if (profiled) REQUIRE_OK(KVProfileStart(nullptr));
    TestSuccess();
    TestRefusals();
    TestPendingWrites();
    for (int r = 0; r < 3; ++r) {
      HeldUntilReturn(true);
      HeldUntilReturn(false);
    }
    if (profiled) REQUIRE_OK(KVProfileStop());
  }
  return check_summary();
}
